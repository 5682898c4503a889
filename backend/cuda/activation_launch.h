#pragma once

// Own kernels of the activation family (activation.cu), enqueued on `stream`; callers
// check cudaGetLastError. Element types: float (f32) and uint16_t (bf16 bits). Per-element
// math in activation_math.h. A result may be its operand's buffer.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/activation.h"
#include "backend/dropout_mask.h"

namespace tandem::backend::cuda {

/// y = a(x) over n elements.
void launchActivation(Activation a, const float* x, float* y, int64_t n, cudaStream_t stream);
void launchActivation(Activation a, const uint16_t* x, uint16_t* y, int64_t n, cudaStream_t stream);

/// dx = dy a'(.) from `saved`: the forward's output for tanh and sigmoid, its input for
/// gelu (backwardReadsOutput).
void launchActivationBackward(Activation a, const float* saved, const float* dy, float* dx,
                              int64_t n, cudaStream_t stream);
void launchActivationBackward(Activation a, const uint16_t* saved, const uint16_t* dy, uint16_t* dx,
                              int64_t n, cudaStream_t stream);

/// y = x * mask * scale over a device's slice [samples, per_sample] whose first sample is
/// `first_sample` of the global batch (also the backward: dy in, dx out), with the mask at
/// the step in `*step` (device memory, read by the kernel: mask.step is ignored); one
/// thread per group of four elements of a sample (dropoutThread).
void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const float* x, float* y,
                   cudaStream_t stream);
void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const uint16_t* x, uint16_t* y,
                   cudaStream_t stream);

}  // namespace tandem::backend::cuda
