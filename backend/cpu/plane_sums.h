#pragma once

// Sums over one channel's plane of H*W contiguous floats, as batch norm's kernels take
// them (norm_kernels.cc and fused_kernels.cc share them, so fused and unfused batch norm
// add the same values in the same order): float with kLanes independent accumulators,
// which the compiler turns into vector adds and which keep the rounding error of a
// 784-value plane near 1e-7.

#include <algorithm>
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

/// A channel's batch statistics as batch norm takes them, over `m` values: the sum, the
/// rounded mean, and the sum of squared deviations from that rounded mean.
struct ChannelMoments {
  double m, sum, sq;
  float fmean;
  double mean() const { return sum / m; }
  /// Biased variance, corrected for the deviations having been taken from the rounded mean.
  double var() const {
    const double d = mean() - fmean;
    return std::max(0.0, sq / m - d * d);
  }
};

/// The moments of one channel of `n` planes of `hw` values each, plane(i) pointing at the
/// i-th: two passes of planeSum (the sum, then squared deviations from the rounded mean).
template <typename Plane>
ChannelMoments planeMoments(int64_t n, int64_t hw, Plane plane) {
  ChannelMoments c{double(n * hw), 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) c.sum += planeSum(plane(i), hw, [](float v) { return v; });
  c.fmean = static_cast<float>(c.sum / c.m);
  const float fmean = c.fmean;
  for (int64_t i = 0; i < n; ++i)
    c.sq += planeSum(plane(i), hw, [fmean](float v) {
      float d = v - fmean;
      return d * d;
    });
  return c;
}

/// The same sums over channel-blocked planes (nChw16c: kBlock channels interleaved per
/// pixel), for each of a block's kBlock channels at once: out[k][l] is, for channel l of
/// the block, the sum of the k-th of `kSums` values f gives, with the additions planeSum
/// makes for that channel in a plain plane, in the same order (kLanes accumulators over
/// consecutive pixels, the tail, then the accumulators), so both layouts give the same
/// bits. f(at, l, v) fills v[0..kSums) for the element at index `at` (channel l).
template <int kBlock, int kSums, typename F>
void blockPlaneSums(int64_t base, int64_t hw, F f, float (&out)[kSums][kBlock]) {
  float acc[kSums][kLanes][kBlock] = {};
  float tail[kSums][kBlock] = {};
  float v[kSums];
  int64_t i = 0;
  for (; i + kLanes <= hw; i += kLanes)
    for (int k = 0; k < kLanes; ++k)
      for (int l = 0; l < kBlock; ++l) {
        f(base + (i + k) * kBlock + l, l, v);
        for (int s = 0; s < kSums; ++s) acc[s][k][l] += v[s];
      }
  for (; i < hw; ++i)
    for (int l = 0; l < kBlock; ++l) {
      f(base + i * kBlock + l, l, v);
      for (int s = 0; s < kSums; ++s) tail[s][l] += v[s];
    }
  for (int s = 0; s < kSums; ++s)
    for (int l = 0; l < kBlock; ++l) {
      float sum = tail[s][l];
      for (int k = 0; k < kLanes; ++k) sum += acc[s][k][l];
      out[s][l] = sum;
    }
}

}  // namespace tandem::backend::cpu
