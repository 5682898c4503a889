// Own kernels of the linear family: the weight conversion for bf16 products and the bias
// gradient (column sums of dy). Math in linear_math.h.

#include <algorithm>

#include "backend/cuda/linear_launch.h"
#include "backend/cuda/linear_math.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) {
  // A grid-stride loop: enough blocks to fill an H100 (132 SMs x 16), no more.
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 132 * 16));
}

// One thread per column: neighbouring threads read neighbouring elements of a row.
template <typename T>
__global__ void columnSumsKernel(const T* m, T* sums, int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(sums, c, columnSum(m, rows, cols, c));
}

}  // namespace

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
