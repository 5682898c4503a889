// Own kernels of the linear family: the bias gradient (column sums of dy) and the bias
// copied into every row of an output (the cuBLAS fallback's epilogue). Math in
// linear_math.h.

#include <algorithm>

#include "backend/cuda/grid.h"
#include "backend/cuda/linear_launch.h"
#include "backend/cuda/linear_math.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) { return gridBlocks(n, kThreads); }

// One thread per column: neighbouring threads read neighbouring elements of a row.
template <typename T>
__global__ void columnSumsKernel(const T* m, T* sums, int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(sums, c, columnSum(m, rows, cols, c));
}

template <typename T>
__global__ void broadcastRowsKernel(const T* row, T* m, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    m[i] = row[rowColumn(i, cols)];
}

}  // namespace

void launchBroadcastRows(const float* row, float* m, int64_t rows, int64_t cols,
                         cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  broadcastRowsKernel<<<blocksFor(rows * cols), kThreads, 0, stream>>>(row, m, rows, cols);
}

void launchBroadcastRows(const uint16_t* row, uint16_t* m, int64_t rows, int64_t cols,
                         cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  broadcastRowsKernel<<<blocksFor(rows * cols), kThreads, 0, stream>>>(row, m, rows, cols);
}

void launchColumnSums(const float* m, float* sums, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  if (cols <= 0) return;
  columnSumsKernel<<<blocksFor(cols), kThreads, 0, stream>>>(m, sums, rows, cols);
}

void launchColumnSums(const uint16_t* m, uint16_t* sums, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  if (cols <= 0) return;
  columnSumsKernel<<<blocksFor(cols), kThreads, 0, stream>>>(m, sums, rows, cols);
}

}  // namespace tandem::backend::cuda
