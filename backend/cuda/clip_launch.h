#pragma once

// clip_grad_norm's own kernels (clip.cu), enqueued on `stream`; callers check
// cudaGetLastError. Gradients are f32 or bf16 (uint16_t bits). The sum of squares is
// deterministic: a fixed grid per gradient (clipBlocks), each block's partial sum in a
// fixed tree, the partials added by one thread in order; so every device reading the
// same gradients makes the same factor (backend/clip_math.h).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// Threads per block of the sum and scale kernels.
inline constexpr int kClipThreads = 256;
/// Blocks the sum of a gradient of n elements takes: one partial sum each.
int64_t clipBlocks(int64_t n);

/// Partial sums of squares of g's n elements into partials[0, clipBlocks(n)).
void launchSumOfSquares(const void* g, bool bf16, int64_t n, double* partials,
                        cudaStream_t stream);
/// *factor = clipFactor(max_norm, the `count` partials added in order).
void launchClipFactor(const double* partials, int64_t count, double max_norm, float* factor,
                      cudaStream_t stream);
/// y = g * *factor over n elements (g and y of one dtype).
void launchClipScale(const void* g, void* y, bool bf16, int64_t n, const float* factor,
                     cudaStream_t stream);

}  // namespace tandem::backend::cuda
