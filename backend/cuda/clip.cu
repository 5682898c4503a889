// clip_grad_norm's kernels: a deterministic sum of squares (clip_math.h's order), the
// factor (backend/clip_math.h), the scaling. See clip_launch.h.

#include <algorithm>

#include "backend/clip_math.h"
#include "backend/cuda/clip_launch.h"
#include "backend/cuda/clip_math.h"
#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {
namespace {

// At most this many blocks per gradient: enough to fill a GPU, few partials to add.
constexpr int64_t kMaxClipBlocks = 512;

template <typename T>
__global__ void sumOfSquaresKernel(const T* g, int64_t n, double* partials) {
  __shared__ double sums[kClipThreads];
  const int64_t blocks = gridDim.x;
  sums[threadIdx.x] = clipThreadSum([g](int64_t i) { return load(g, i); }, n, blocks,
                                    kClipThreads, blockIdx.x, static_cast<int>(threadIdx.x));
  __syncthreads();
  // clipTreeSum's order, one level per step, each thread adding its pair.
  for (int half = kClipThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

__global__ void clipFactorKernel(const double* partials, int64_t count, double max_norm,
                                 float* factor) {
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += partials[i];
  *factor = clipFactor(max_norm, s);
}

template <typename T>
__global__ void clipScaleKernel(const T* g, T* y, int64_t n, const float* factor) {
  const float f = *factor;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    store(y, i, load(g, i) * f);
}

}  // namespace

int64_t clipBlocks(int64_t n) {
  return std::clamp<int64_t>((n + kClipThreads - 1) / kClipThreads, 1, kMaxClipBlocks);
}

void launchSumOfSquares(const void* g, bool bf16, int64_t n, double* partials,
                        cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(clipBlocks(n));
  if (bf16)
    sumOfSquaresKernel<<<blocks, kClipThreads, 0, stream>>>(static_cast<const uint16_t*>(g), n,
                                                            partials);
  else
    sumOfSquaresKernel<<<blocks, kClipThreads, 0, stream>>>(static_cast<const float*>(g), n,
                                                            partials);
}

void launchClipFactor(const double* partials, int64_t count, double max_norm, float* factor,
                      cudaStream_t stream) {
  clipFactorKernel<<<1, 1, 0, stream>>>(partials, count, max_norm, factor);
}

void launchClipScale(const void* g, void* y, bool bf16, int64_t n, const float* factor,
                     cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned blocks = static_cast<unsigned>(clipBlocks(n));
  if (bf16)
    clipScaleKernel<<<blocks, kClipThreads, 0, stream>>>(static_cast<const uint16_t*>(g),
                                                         static_cast<uint16_t*>(y), n, factor);
  else
    clipScaleKernel<<<blocks, kClipThreads, 0, stream>>>(static_cast<const float*>(g),
                                                         static_cast<float*>(y), n, factor);
}

}  // namespace tandem::backend::cuda
