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

/// m[r * cols + c] = row[c] for every r < rows, c < cols (the bias in every row of the
/// output, before cuBLAS adds the product to it), as the element type.
void launchBroadcastRows(const float* row, float* m, int64_t rows, int64_t cols,
                         cudaStream_t stream);
void launchBroadcastRows(const uint16_t* row, uint16_t* m, int64_t rows, int64_t cols,
                         cudaStream_t stream);

}  // namespace tandem::backend::cuda
