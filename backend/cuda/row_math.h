#pragma once

// Per-row math of the own kernels that normalize along one axis (rows.cu): layer norm
// over the last dimension, softmax and log-softmax over any axis, and sum and mean over
// an axis, compiled for the GPU and by the host tests, which check them against the CPU
// cores (oneDNN's layer_normalization, softmax and reduction primitives: the same
// formulas, other orders of addition and other exp and log approximations, so agreement
// to a few ulps of the tensor's scale).
//
// A row is shared by `lanes` threads (a warp: lane l takes the elements l, l + lanes, ...,
// in order); the kernel combines the lanes' partial results with a butterfly whose order
// is fixed (warp_reduce.cuh), so every run gives the same bits. A row's elements are
// `stride` apart: 1 along the last axis, the product of the later dimensions otherwise
// (backend/axis_split.h's inner). All arithmetic is float; bf16 is widened exactly and
// rounded once when stored.

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

// ---- Layer norm: statistics in two passes (mean, then squared deviations: no
// cancellation), biased variance, as oneDNN and PyTorch compute them.

/// This lane's sum of the row's values.
template <typename T>
TANDEM_HD float laneRowSum(const T* row, int64_t n, int lane, int lanes) {
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += lanes) s += load(row, j);
  return s;
}

/// This lane's sum of squared deviations from `mean`.
template <typename T>
TANDEM_HD float laneRowSquaredDeviation(const T* row, int64_t n, float mean, int lane, int lanes) {
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += lanes) {
    const float d = load(row, j) - mean;
    s += d * d;
  }
  return s;
}

/// 1 / sqrt(var + eps), IEEE-rounded on both sides.
TANDEM_HD float layerNormRstd(float var, float eps) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(1.0f, __fsqrt_rn(var + eps));
#else
  return 1.0f / std::sqrt(var + eps);
#endif
}

/// y = (x - mean) rstd gamma + beta.
TANDEM_HD float layerNormOut(float x, float mean, float rstd, float gamma, float beta) {
  return (x - mean) * rstd * gamma + beta;
}

/// This lane's sums over the row of g = dy gamma and of g xhat, xhat = (x - mean) rstd:
/// the two means dx needs.
struct LayerNormGradSums {
  float g, gx;
};
template <typename T>
TANDEM_HD LayerNormGradSums laneLayerNormGradSums(const T* x, const T* dy, const float* gamma,
                                                  int64_t n, float mean, float rstd, int lane,
                                                  int lanes) {
  LayerNormGradSums s{0.0f, 0.0f};
  for (int64_t j = lane; j < n; j += lanes) {
    const float g = load(dy, j) * gamma[j];
    s.g += g;
    s.gx += g * ((load(x, j) - mean) * rstd);
  }
  return s;
}

/// dx = rstd (g - mean(g) - xhat mean(g xhat)).
TANDEM_HD float layerNormGradIn(float x, float dy, float gamma, float mean, float rstd,
                                float mean_g, float mean_gx) {
  const float xhat = (x - mean) * rstd;
  return rstd * (dy * gamma - mean_g - xhat * mean_gx);
}

/// dgamma and dbeta of column c: sums over the rows, in row order, of dy xhat and dy.
struct LayerNormParamGrads {
  float dgamma, dbeta;
};
template <typename T>
TANDEM_HD LayerNormParamGrads layerNormParamGrads(const T* x, const T* dy, const float* mean,
                                                  const float* var, float eps, int64_t rows,
                                                  int64_t width, int64_t c) {
  LayerNormParamGrads s{0.0f, 0.0f};
  for (int64_t r = 0; r < rows; ++r) {
    const float d = load(dy, r * width + c);
    const float xhat = (load(x, r * width + c) - mean[r]) * layerNormRstd(var[r], eps);
    s.dgamma += d * xhat;
    s.dbeta += d;
  }
  return s;
}

// ---- Softmax and log-softmax over a row of n values `stride` apart.

/// This lane's largest value (-inf when it has none).
template <typename T>
TANDEM_HD float laneRowMax(const T* row, int64_t n, int64_t stride, int lane, int lanes) {
  float m = -INFINITY;
  for (int64_t j = lane; j < n; j += lanes) {
    const float v = load(row, j * stride);
    m = v > m ? v : m;
  }
  return m;
}

/// This lane's sum of exp(x - max).
template <typename T>
TANDEM_HD float laneRowExpSum(const T* row, int64_t n, int64_t stride, float max, int lane,
                              int lanes) {
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += lanes) s += ::expf(load(row, j * stride) - max);
  return s;
}

/// softmax: exp(x - max) / sum; log-softmax: x - max - log(sum).
TANDEM_HD float softmaxOut(float x, float max, float sum, bool log) {
  return log ? x - max - ::logf(sum) : ::expf(x - max) / sum;
}

/// This lane's part of what dx needs: sum(dy y) for softmax, sum(dy) for log-softmax.
template <typename T>
TANDEM_HD float laneSoftmaxGradSum(const T* y, const T* dy, int64_t n, int64_t stride, bool log,
                                   int lane, int lanes) {
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += lanes) {
    const float d = load(dy, j * stride);
    s += log ? d : d * load(y, j * stride);
  }
  return s;
}

/// softmax: y (dy - sum(dy y)); log-softmax: dy - exp(y) sum(dy).
TANDEM_HD float softmaxGradIn(float y, float dy, float sum, bool log) {
  return log ? dy - ::expf(y) * sum : y * (dy - sum);
}

// ---- Sum and mean over the axis of [outer, axis, inner].

/// y[o, i]: the axis' values added in order (one thread per output), times `scale`
/// (1, or 1/axis for the mean, rounded to float once as the CPU's backward rounds it).
template <typename T>
TANDEM_HD float axisSum(const T* x, int64_t o, int64_t i, int64_t axis, int64_t inner,
                        float scale) {
  const T* p = x + o * axis * inner + i;
  float s = 0.0f;
  for (int64_t a = 0; a < axis; ++a) s += load(p, a * inner);
  return s * scale;
}

/// dx[o, a, i] = dy[o, i] * scale: the CPU core's reduceBackward exactly.
template <typename T>
TANDEM_HD float axisSpread(const T* dy, int64_t index, int64_t axis, int64_t inner, float scale) {
  const int64_t i = index % inner, o = index / inner / axis;
  return load(dy, o * inner + i) * scale;
}

}  // namespace tandem::backend::cuda
