#pragma once

// Grids of the own kernels' grid-stride loops: enough blocks to fill the GPU a kernel runs
// on (16 per multiprocessor: 132 SMs on an H100, 108 on an A100), never more, since each
// thread loops over what the grid leaves. The count is asked of the GPU once and cached,
// so a launch costs a cudaGetDevice and a load. The results never depend on the grid:
// every grid-stride loop computes each element alone, whatever the number of blocks.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace tandem::backend::cuda {

inline constexpr int64_t kBlocksPerMultiprocessor = 16;

/// Blocks of `threads` for `n` items on a GPU of `multiprocessors` SMs: one per `threads`
/// items, at least 1, at most kBlocksPerMultiprocessor per SM.
inline unsigned gridBlocks(int64_t n, int threads, int multiprocessors) {
  const int64_t cap = kBlocksPerMultiprocessor * std::max(multiprocessors, 1);
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, cap));
}

/// The number of multiprocessors of GPU `gpu` (cudaDevAttrMultiProcessorCount), asked once
/// per GPU and process.
cudaError_t gpuMultiprocessors(int gpu, int* count);

/// gridBlocks on the current GPU (a kernel's launch makes its GPU current). Should CUDA
/// not answer, 1 multiprocessor's worth: slower, never wrong.
unsigned gridBlocks(int64_t n, int threads);

}  // namespace tandem::backend::cuda
