#include "backend/cuda/grid.h"

#include <array>
#include <atomic>

namespace tandem::backend::cuda {
namespace {

// By GPU ordinal; 0 = not asked yet. Two threads asking at once both store the same count.
constexpr int kMaxGpus = 64;
std::array<std::atomic<int>, kMaxGpus> multiprocessors{};

}  // namespace

cudaError_t gpuMultiprocessors(int gpu, int* count) {
  const bool cached = gpu >= 0 && gpu < kMaxGpus;
  if (cached && (*count = multiprocessors[static_cast<size_t>(gpu)].load()) > 0) return cudaSuccess;
  const cudaError_t e = cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, gpu);
  if (e == cudaSuccess && cached) multiprocessors[static_cast<size_t>(gpu)].store(*count);
  return e;
}

unsigned gridBlocks(int64_t n, int threads) {
  int gpu = 0, count = 1;
  if (cudaGetDevice(&gpu) != cudaSuccess || gpuMultiprocessors(gpu, &count) != cudaSuccess) {
    (void)cudaGetLastError();  // not the launch's error
    count = 1;
  }
  return gridBlocks(n, threads, count);
}

}  // namespace tandem::backend::cuda
