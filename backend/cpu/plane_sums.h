#pragma once

// Batch norm's arithmetic, shared by norm_kernels.cc and fused_kernels.cc so that fused
// and unfused batch norm add the same values in the same order: sums over one channel's
// plane of H*W contiguous values (float with kLanes independent accumulators, which the
// compiler turns into vector adds and which keep the rounding error of a 784-value plane
// near 1e-7), the same sums over channel-blocked planes, a channel's moments and the
// backward's per-channel coefficients.
//
// The activations are of element type T, float or bf16 (bf16.h); the sums run in float
// (and double) either way, each value widened as it is read.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

namespace tandem::backend::cpu {

inline constexpr int kLanes = 8;

/// sum(f(p[i])) over one plane (f takes a float).
template <typename T, typename F>
float planeSum(const T* p, int64_t n, F f) {
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

/// dz = dout unless relu's output is <= 0 (PyTorch's threshold_backward: a NaN output
/// passes dout); dout itself without relu. A compile-time choice, so that the loops below
/// vectorize (a select, no branch).
template <bool kRelu, typename T>
inline float maskedGrad(const T* dout, const T* out, int64_t i) {
  const float d = dout[i];
  if constexpr (!kRelu) return d;
  // out <= 0 ? +0 : d, as a bit mask: GCC leaves a select inside the unrolled accumulator
  // loops as a branch, and the loop then does not vectorize.
  const float o = out[i];
  const uint32_t keep = 0u - static_cast<uint32_t>(!(o <= 0.0f));
  return std::bit_cast<float>(std::bit_cast<uint32_t>(d) & keep);
}

/// sum(dz) and sum(dz * (y - mu)) over one plane in one pass, each in float with kLanes
/// accumulators: the same additions, in the same order, as two planeSum passes, over half
/// the memory traffic (batch_norm_backward and batch_norm_backward_reduce). `rp` (relu's
/// output) is read with kRelu only, and may be nullptr otherwise.
template <bool kRelu, typename T>
void planeGradSums(const T* dp, const T* yp, const std::type_identity_t<T>* rp, int64_t n,
                   float mu, float* sum_dz, float* sum_dz_yc) {
  float a[kLanes] = {}, b[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float dz = maskedGrad<kRelu>(dp, rp, i + l), y = yp[i + l];
      a[l] += dz;
      b[l] += dz * (y - mu);
    }
  float sa = 0, sb = 0;
  for (; i < n; ++i) {
    const float dz = maskedGrad<kRelu>(dp, rp, i), y = yp[i];
    sa += dz;
    sb += dz * (y - mu);
  }
  for (int l = 0; l < kLanes; ++l) sa += a[l], sb += b[l];
  *sum_dz = sa;
  *sum_dz_yc = sb;
}

/// Batch norm's backward as dx = a * dz + b * (y - mean) + c per channel, from the sums
/// over its m values (sum dz, sum dz * (y - mean)), gamma and 1/std:
///   dx = gamma * invstd * (dz - sum_dz / m - (y - mean) * invstd^2 * sum_dz_yc / m),
/// rounded to float once per channel (batch_norm_backward and batch_norm_backward_apply).
struct BackwardCoefficients {
  float a, b, c;
};
inline BackwardCoefficients backwardCoefficients(double m, double sum_dz, double sum_dz_yc,
                                                 float gamma, float invstd) {
  const double is = invstd, a = gamma * is;
  return {static_cast<float>(a), static_cast<float>(-a * is * is * sum_dz_yc / m),
          static_cast<float>(-a * sum_dz / m)};
}

/// v, or 0 where rounding made it negative; a NaN stays NaN.
inline double nonNegative(double v) { return v < 0.0 ? 0.0 : v; }

/// A channel's batch statistics as batch norm takes them, over `m` values: the sum, the
/// rounded mean, and the sum of squared deviations from that rounded mean.
struct ChannelMoments {
  double m, sum, sq;
  float fmean;
  double mean() const { return sum / m; }
  /// Biased variance, corrected for the deviations having been taken from the rounded mean,
  /// never below 0 from rounding; NaN stays NaN (std::max(0.0, NaN) is 0: a channel holding
  /// an inf then had variance 0 and finite statistics where PyTorch's are NaN).
  double var() const {
    const double d = mean() - fmean;
    return nonNegative(sq / m - d * d);
  }
};

/// The moments of one channel of `n` planes of `hw` values each, plane(i) pointing at the
/// i-th (a const T*): two passes of planeSum (the sum, then squared deviations from the
/// rounded mean).
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
