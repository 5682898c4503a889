// Own kernel of compare, where, mod and mod_backward: a gather through each operand's
// broadcast map and select_at.h's per-element math (host-tested against the CPU kernels).
// cuDNN's op tensor has no comparison, select or remainder; memory bound, one thread per
// result element.

#include "backend/cuda/elementwise_map.cuh"
#include "backend/cuda/select_launch.h"

namespace tandem::backend::cuda {
namespace {

template <typename Y>
__global__ void selectKernel(SelectOperands ops, Y* y, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) store(y, i, selectAt(ops, i));
}

}  // namespace

void launchSelect(const SelectOperands& ops, void* y, bool y_bf16, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (y_bf16)
    selectKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(ops, static_cast<uint16_t*>(y), n);
  else
    selectKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(ops, static_cast<float*>(y), n);
}

}  // namespace tandem::backend::cuda
