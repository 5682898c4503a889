#pragma once

// Sums over one channel's plane of H*W contiguous floats, as batch norm's kernels take
// them (norm_kernels.cc and fused_kernels.cc share them, so fused and unfused batch norm
// add the same values in the same order): float with kLanes independent accumulators,
// which the compiler turns into vector adds and which keep the rounding error of a
// 784-value plane near 1e-7.

#include <cstdint>

namespace tandem::backend::cpu {

inline constexpr int kLanes = 8;

/// sum(f(p[i])) over one plane.
template <typename F>
float planeSum(const float* p, int64_t n, F f) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(p[i + l]);
  float tail = 0;
  for (; i < n; ++i) tail += f(p[i]);
  float s = tail;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

/// sum(f(a[i], b[i])) over one plane.
template <typename F>
float planeSum2(const float* a, const float* b, int64_t n, F f) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(a[i + l], b[i + l]);
  float tail = 0;
  for (; i < n; ++i) tail += f(a[i], b[i]);
  float s = tail;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

}  // namespace tandem::backend::cpu
