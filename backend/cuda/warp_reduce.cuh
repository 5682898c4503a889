#pragma once

// Warp-wide butterflies over one value per lane (nvcc only): after log2(32) exchanges
// every lane holds the same result, and the pairing of each step is fixed, so the result's
// bits do not depend on timing. The host tests replay the same pairings
// (tests/cuda/transformer_math_test.cc: butterfly()) to compare with the CPU.

#include <cuda_runtime_api.h>

namespace tandem::backend::cuda {

inline constexpr int kWarpLanes = 32;
inline constexpr unsigned kFullWarp = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T warpButterflySum(T v) {
#pragma unroll
  for (int o = kWarpLanes / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullWarp, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ T warpButterflyMax(T v) {
#pragma unroll
  for (int o = kWarpLanes / 2; o > 0; o /= 2) {
    const T other = __shfl_xor_sync(kFullWarp, v, o);
    v = other > v ? other : v;
  }
  return v;
}

/// This thread's lane, its warp's index in the grid, and the grid's warps.
__device__ __forceinline__ int laneIndex() { return static_cast<int>(threadIdx.x) % kWarpLanes; }
__device__ __forceinline__ int64_t gridWarp() {
  return (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarpLanes;
}
__device__ __forceinline__ int64_t gridWarps() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpLanes;
}

}  // namespace tandem::backend::cuda
