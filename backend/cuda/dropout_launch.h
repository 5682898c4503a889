#pragma once

// dropout's own kernel (dropout.cu), enqueued on `stream`; callers check
// cudaGetLastError. Element types: float (f32) and uint16_t (bf16 bits). Per-thread math
// in dropout_math.h. The result may be the operand's buffer.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/dropout_mask.h"

namespace tandem::backend::cuda {

/// y = x * mask * scale over a device's slice [samples, per_sample] whose first sample is
/// `first_sample` of the global batch (also the backward: dy in, dx out), with the mask at
/// the step in `*step` (device memory, read by the kernel: mask.step is ignored); one
/// thread per group of eight elements of a sample (dropoutThread).
void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const float* x, float* y,
                   cudaStream_t stream);
void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const uint16_t* x, uint16_t* y,
                   cudaStream_t stream);

}  // namespace tandem::backend::cuda
