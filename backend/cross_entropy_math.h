#pragma once

// Softmax cross-entropy with label smoothing (PyTorch's nn.CrossEntropyLoss with
// label_smoothing = eps), per row of logits x over C classes:
//
//   target q_j = (1 - eps) [j == label] + eps / C
//   loss       = -sum_j q_j log softmax(x)_j = lse(x) - (1 - eps) x_label - eps/C sum_j x_j
//   dloss/dx_j = softmax(x)_j - q_j
//
// (sum_j q_j = 1 lets the log-sum-exp come out of the sum.) eps = 0 is the plain loss.
// In double, shifted by the row's maximum, as the unsmoothed loss kernels compute. A row
// is shared by `lanes` threads (a GPU warp: lane l takes classes l, l + lanes, ...), whose
// partial results the CUDA kernel combines in a fixed butterfly order; with lanes = 1
// these are the CPU core's loops (backend/cpu/cross_entropy_core.h). Rows with a negative
// label are padding (a last partial batch): no loss, zero gradient. A label >= C is a
// bug in the data; it makes the row's loss NaN (never a read out of bounds), so training
// stops at the non-finite loss on either backend.
//
// A row's classes are `stride` floats apart: 1 for classes on the last axis ([N, C],
// [B, T, V]), the product of the axes after the class axis otherwise (torch's [N, C, d]).
// Class weights w (nn.CrossEntropyLoss(weight=w)) scale a row's terms as PyTorch's:
//
//   loss       = (1 - eps) w_y (lse - x_y) + eps/C sum_j w_j (lse - x_j)
//   dloss/dx_j = p_j ((1 - eps) w_y + eps/C W) - ((1 - eps) w_y [j == y] + eps/C w_j)
//
// with W = sum_j w_j; the ce*Weighted functions below, the unweighted ones untouched.

#include <cmath>
#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

/// The largest of this lane's logits (-inf when it has none; NaNs skipped here, they
/// reach the loss through the sums).
TANDEM_HD double ceLaneMax(const float* row, int64_t classes, int lane, int lanes,
                           int64_t stride = 1) {
  double m = -INFINITY;
  for (int64_t j = lane; j < classes; j += lanes) {
    const double v = row[j * stride];
    m = v > m ? v : m;
  }
  return m;
}

/// sum(exp(x - max)) and sum(x) over this lane's logits, in class order.
struct CeLaneSums {
  double exp_sum, sum;
};
TANDEM_HD CeLaneSums ceLaneSums(const float* row, int64_t classes, double max, int lane, int lanes,
                                int64_t stride = 1) {
  CeLaneSums s{0.0, 0.0};
  for (int64_t j = lane; j < classes; j += lanes) {
    const double v = row[j * stride];
    s.exp_sum += ::exp(v - max);
    s.sum += v;
  }
  return s;
}

/// The row's log-sum-exp from its maximum and shifted exp sum.
TANDEM_HD double ceLogSumExp(double max, double exp_sum) { return max + ::log(exp_sum); }

/// The row's loss (label >= 0); NaN for a label past the last class.
TANDEM_HD double ceRowLoss(const float* row, int64_t classes, int32_t label, double lse, double sum,
                           double smoothing, int64_t stride = 1) {
  if (label >= classes) return NAN;
  const double x_label = row[label * stride];
  const double loss = lse - (1.0 - smoothing) * x_label;
  // Without smoothing PyTorch has no term of the sum: 0 * sum would be NaN for a -inf
  // logit, whose row's loss is +inf when it is the label's, else finite.
  return smoothing == 0.0 ? loss : loss - smoothing / static_cast<double>(classes) * sum;
}

/// dlogits_j = (softmax_j - q_j) * scale, rounded to float once; scale = dloss / divisor.
TANDEM_HD float ceGrad(float x, bool is_label, double lse, double smoothing, int64_t classes,
                       double scale) {
  const double p = ::exp(static_cast<double>(x) - lse);
  const double q = (is_label ? 1.0 - smoothing : 0.0) + smoothing / static_cast<double>(classes);
  return static_cast<float>((p - q) * scale);
}

/// Whether a target counts: a label >= 0 that is not ignore_index (a label past the last
/// class counts, and makes the loss NaN).
TANDEM_HD bool ceCounts(int32_t label, int64_t ignore_index) {
  return label >= 0 && label != ignore_index;
}

/// sum_j w_j x_j over this lane's classes (the weighted smoothing term), in class order.
TANDEM_HD double ceLaneWeightedSum(const float* row, const float* weight, int64_t classes, int lane,
                                   int lanes, int64_t stride = 1) {
  double s = 0.0;
  for (int64_t j = lane; j < classes; j += lanes)
    s += static_cast<double>(weight[j]) * static_cast<double>(row[j * stride]);
  return s;
}

/// W = sum_j w_j, in class order (the same on every row: computed once per launch).
TANDEM_HD double ceWeightTotal(const float* weight, int64_t classes) {
  double s = 0.0;
  for (int64_t j = 0; j < classes; ++j) s += weight[j];
  return s;
}

/// The row's weighted loss (label >= 0); NaN for a label past the last class. wsum is
/// sum_j w_j x_j, wtotal W.
TANDEM_HD double ceRowLossWeighted(const float* row, const float* weight, int64_t classes,
                                   int32_t label, double lse, double wsum, double wtotal,
                                   double smoothing, int64_t stride = 1) {
  if (label >= classes) return NAN;
  const double w_label = weight[label];
  const double nll = lse - static_cast<double>(row[label * stride]);
  if (smoothing == 0.0) return w_label * nll;
  return (1.0 - smoothing) * w_label * nll +
         smoothing / static_cast<double>(classes) * (wtotal * lse - wsum);
}

/// dlogits_j of a weighted row, rounded to float once; scale = dloss / divisor (or total).
TANDEM_HD float ceGradWeighted(float x, bool is_label, double w_j, double w_label, double wtotal,
                               double lse, double smoothing, int64_t classes, double scale) {
  const double p = ::exp(static_cast<double>(x) - lse);
  const double eps_c = smoothing / static_cast<double>(classes);
  const double a = (1.0 - smoothing) * w_label + eps_c * wtotal;
  const double b = (is_label ? (1.0 - smoothing) * w_label : 0.0) + eps_c * w_j;
  return static_cast<float>((p * a - b) * scale);
}

/// target_weight_sum's term of one target: w[label] (1 without weights) when it counts,
/// else 0; NaN for a label past the last class of the weights.
TANDEM_HD double ceTargetWeight(int32_t label, int64_t ignore_index, const float* weight,
                                int64_t classes) {
  if (!ceCounts(label, ignore_index)) return 0.0;
  if (weight == nullptr) return 1.0;
  return label < classes ? static_cast<double>(weight[label]) : NAN;
}

}  // namespace tandem::backend
