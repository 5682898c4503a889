#pragma once

// Batch norm's per-channel and per-element math for the CUDA kernels, compiled for the
// host too (tests/cuda/norm_kernels_test.cc checks it against the CPU backend). The
// conventions are the CPU's (backend/cpu/norm_kernels.cc, fused_kernels.cc): the biased
// variance normalizes, the unbiased one goes into running_var; statistics tensors are
// f64[3,C] (count, sum, sum of squares); coefficients are computed in double and rounded
// to float once per channel.

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// Threads of a block of a per-channel reduction (norm.cu): one block per channel, so as
/// many threads as a block may have, to keep loads in flight on the few SMs a layer of 64
/// channels occupies. The order of a channel's additions depends on it.
inline constexpr int kNormReduceThreads = 1024;

/// The values of channel `ch` of an [N,C,HW] tensor in the order k = img * hw + i, as one
/// thread of a per-channel reduction visits them: from k0 in steps of `step` (its block's
/// thread count), with no division per element (a 64-bit division costs as much as the
/// memory traffic). `at` is the element's index, `i` its place in its plane. hw > 0.
struct ChannelWalk {
  int64_t hw, i, at, di, dat, wrap;
  TANDEM_HD ChannelWalk(int64_t k0, int64_t ch, int64_t c, int64_t hw_, int64_t step) {
    hw = hw_;
    i = k0 % hw;
    at = ((k0 / hw) * c + ch) * hw + i;
    di = step % hw;
    dat = (step / hw) * c * hw + di;
    wrap = (c - 1) * hw;
  }
  /// `step` values on: step / hw planes of the channel (c * hw elements each) and di
  /// places, carrying into the next plane when the place passes hw.
  TANDEM_HD void next() {
    i += di;
    at += dat;
    if (i >= hw) {
      i -= hw;
      at += wrap;
    }
  }
};

/// The channel of element l of an [N,C,HW] tensor for a grid-stride loop, from l0 in steps
/// of `step`, again without a division per element. c > 0, hw > 0.
struct ChannelOf {
  int64_t c, hw, ch, i, dch, di;
  TANDEM_HD ChannelOf(int64_t l0, int64_t c_, int64_t hw_, int64_t step) {
    c = c_;
    hw = hw_;
    i = l0 % hw;
    ch = (l0 / hw) % c;
    di = step % hw;
    dch = (step / hw) % c;
  }
  /// ch + dch + carry < 2c, so one subtraction wraps it.
  TANDEM_HD void next() {
    i += di;
    int64_t carry = 0;
    if (i >= hw) {
      i -= hw;
      carry = 1;
    }
    ch += dch + carry;
    if (ch >= c) ch -= c;
  }
};

/// v, or 0 where rounding made it negative; a NaN stays NaN (`v > 0 ? v : 0` made a
/// channel holding an inf finite, where PyTorch's statistics are NaN): the CPU's
/// nonNegative (backend/cpu/plane_sums.h).
TANDEM_HD double nonNegative(double v) { return v < 0.0 ? 0.0 : v; }

/// A channel's count, mean and biased variance from a statistics tensor f64[3, C].
struct NormStats {
  double count, mean, var;
};
TANDEM_HD NormStats readNormStats(const double* stats, int64_t channels, int64_t ch) {
  const double count = stats[ch], sum = stats[channels + ch], sumsq = stats[2 * channels + ch];
  const double mean = count > 0 ? sum / count : 0;
  const double v = count > 0 ? sumsq / count - mean * mean : 0;
  return {count, mean, nonNegative(v)};
}

/// The statistics row batch norm's two-pass moments give: `sum` of the values and `sq`, the
/// sum of squared deviations from `fmean` (the mean rounded to float), over `m` values.
/// Returns {count, sum, m * var + m * mean^2}, var corrected for the rounded mean.
struct StatsRow {
  double count, sum, sumsq;
};
TANDEM_HD StatsRow statsRow(double m, double sum, double sq, float fmean) {
  const double mean = sum / m, d = mean - static_cast<double>(fmean);
  const double var = nonNegative(sq / m - d * d);
  return {m, sum, m * var + m * mean * mean};
}

/// Biased variance from the two-pass moments (batch_norm's own statistics).
TANDEM_HD double momentsVar(double m, double sum, double sq, float fmean) {
  const double d = sum / m - static_cast<double>(fmean);
  return nonNegative(sq / m - d * d);
}

/// Scale and shift of one channel, rounded as the CPU rounds them.
struct NormAffine {
  float scale, shift;
  double invstd;
};
TANDEM_HD NormAffine normAffine(double mean, double var, float gamma, float beta, double eps) {
  const double invstd = 1.0 / sqrt(var + eps);
  const double scale = static_cast<double>(gamma) * invstd;
  return {static_cast<float>(scale), static_cast<float>(static_cast<double>(beta) - mean * scale),
          invstd};
}

/// Inference batch norm's scale and shift from the running statistics.
TANDEM_HD NormAffine inferenceAffine(float mean, float var, float gamma, float beta, double eps) {
  const double scale = static_cast<double>(gamma) / sqrt(static_cast<double>(var) + eps);
  return {static_cast<float>(scale),
          static_cast<float>(static_cast<double>(beta) - static_cast<double>(mean) * scale),
          0.0};
}

/// running = (1 - momentum) * running + momentum * batch statistic; the variance unbiased
/// (m / (m - 1); one value per channel keeps the biased one).
TANDEM_HD void updateRunning(float* running_mean, float* running_var, double mean, double var,
                             double count, double momentum) {
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  *running_mean = static_cast<float>((1 - momentum) * static_cast<double>(*running_mean) +
                                     momentum * mean);
  *running_var = static_cast<float>((1 - momentum) * static_cast<double>(*running_var) +
                                    momentum * unbias * var);
}

/// relu?(x * scale + shift + residual?), rounded step by step in float as the unfused ops
/// (batch_norm, add, relu) round it. max(v, 0) keeps a NaN, as std::max(v, 0.0f) does.
TANDEM_HD float normalizeOne(float x, float scale, float shift, bool has_residual, float residual,
                             bool relu) {
  float v = x * scale + shift;
  if (has_residual) v = v + residual;
  if (relu) v = v < 0.0f ? 0.0f : v;
  return v;
}

/// dout unless relu's output is <= 0, else +0 (relu_backward's mask, PyTorch's
/// threshold_backward: a NaN output passes dout).
TANDEM_HD float maskedGrad(float dout, bool relu, float out) {
  return relu && out <= 0.0f ? 0.0f : dout;
}

/// Backward as dx = a * dz + b * (y - mean) + c per channel from the sums over its m
/// values (sum dz, sum dz * (y - mean)), gamma and 1/std.
struct NormBackward {
  float a, b, c;
};
TANDEM_HD NormBackward normBackward(double m, double sum_dz, double sum_dz_yc, float gamma,
                                    float invstd) {
  const double is = invstd, a = static_cast<double>(gamma) * is;
  return {static_cast<float>(a), static_cast<float>(-a * is * is * sum_dz_yc / m),
          static_cast<float>(-a * sum_dz / m)};
}
TANDEM_HD float normBackwardOne(const NormBackward& k, float dz, float y, float mean) {
  return k.a * dz + k.b * (y - mean) + k.c;
}

/// fold_batch_norm's per-output-channel scale (w' = w * float(scale)) and folded bias.
TANDEM_HD double foldScale(float gamma, float var, double eps) {
  return static_cast<double>(gamma) / sqrt(static_cast<double>(var) + eps);
}
TANDEM_HD float foldBias(double bias, float mean, double scale, float beta) {
  return static_cast<float>((bias - static_cast<double>(mean)) * scale + static_cast<double>(beta));
}

}  // namespace tandem::backend::cuda
