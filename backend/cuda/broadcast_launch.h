#pragma once

// Launches of the own kernels of scale, add_bcast, mul_bcast, concat_axis, slice_axis and
// slice_axis_backward (broadcast.cu), enqueued on `stream`; callers check
// cudaGetLastError. Element types by flag: bf16 (uint16_t bits) or f32. One thread per
// result element in a grid-stride loop; the math is broadcast_math.h's.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/broadcast_index.h"

namespace tandem::backend::cuda {

/// y = factor * x over n elements of one dtype.
void launchScale(const void* x, void* y, bool bf16, float factor, int64_t n, cudaStream_t stream);

/// y (n elements) = a op b through their maps; op is * when `mul`, else +.
void launchBroadcastBinary(const void* a, bool a_bf16, const void* b, bool b_bf16, void* y,
                           bool y_bf16, const BroadcastMap& ma, const BroadcastMap& mb, bool mul,
                           int64_t n, cudaStream_t stream);

/// One concat_axis operand x into its block [outer, len, inner] at `start` of
/// y [outer, total, inner].
void launchConcatPart(const void* x, bool x_bf16, void* y, bool y_bf16, const BroadcastMap& map,
                      int64_t outer, int64_t len, int64_t inner, int64_t total, int64_t start,
                      cudaStream_t stream);

/// slice_axis (block from whole) or, with `backward`, slice_axis_backward (whole from
/// block, zeros around it); elements of `element_bytes` (2 or 4).
void launchSliceAxis(const void* in, void* out, int element_bytes, int64_t outer, int64_t len,
                     int64_t inner, int64_t size, int64_t start, bool backward,
                     cudaStream_t stream);

}  // namespace tandem::backend::cuda
