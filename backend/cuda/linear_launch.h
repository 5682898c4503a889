#pragma once

// Own kernels of the linear family (linear.cu), enqueued on `stream`; callers check
// cudaGetLastError.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// sums[c] = columnSum(m, rows, cols, c) for c < cols (linear_math.h), stored as the
/// element type (f32, or bf16 bits).
void launchColumnSums(const float* m, float* sums, int64_t rows, int64_t cols, cudaStream_t stream);
void launchColumnSums(const uint16_t* m, uint16_t* sums, int64_t rows, int64_t cols,
                      cudaStream_t stream);

}  // namespace tandem::backend::cuda
