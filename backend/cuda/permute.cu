// transpose's own kernel: a gather through permute_math.h's index math. Why a loop of
// our own: cuBLAS's geam transposes only the last two axes of one matrix, and attention's
// [batch, tokens, heads, width] -> [batch, heads, tokens, width] moves an outer axis;
// cuTENSOR would do it but is not in the toolkit we build against.

#include "backend/cuda/elementwise_map.cuh"
#include "backend/cuda/permute_launch.h"

namespace tandem::backend::cuda {
namespace {

template <typename T>
__global__ void permuteKernel(const T* x, T* y, int64_t n, PermutePlan plan) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) y[i] = x[permuteSource(plan, i)];
}

}  // namespace

void launchPermute(const void* x, void* y, int64_t n, int element_bytes, const PermutePlan& plan,
                   cudaStream_t stream) {
  if (n <= 0) return;
  if (element_bytes == 2)
    permuteKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                            static_cast<uint16_t*>(y), n, plan);
  else
    permuteKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(static_cast<const uint32_t*>(x),
                                                            static_cast<uint32_t*>(y), n, plan);
}

}  // namespace tandem::backend::cuda
