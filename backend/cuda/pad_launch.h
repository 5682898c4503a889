#pragma once

// pad and pad_backward's own kernels (pad.cu), enqueued on `stream`; callers check
// cudaGetLastError. Element types: float (f32) or uint16_t (bf16 bits). Index math in
// backend/pad_math.h, the CPU kernels' own.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/pad_math.h"

namespace tandem::backend::cuda {

/// y = pad(x): every output element from its source element, or `value`.
void launchPad(const float* x, float* y, const PadGeometry& g, float value, cudaStream_t stream);
void launchPad(const uint16_t* x, uint16_t* y, const PadGeometry& g, float value,
               cudaStream_t stream);

/// dx = pad_backward(dy): every input element the sum of dy over the outputs that read it.
void launchPadBackward(const float* dy, float* dx, const PadGeometry& g, cudaStream_t stream);
void launchPadBackward(const uint16_t* dy, uint16_t* dx, const PadGeometry& g, cudaStream_t stream);

}  // namespace tandem::backend::cuda
