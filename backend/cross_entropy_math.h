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

#include <cmath>
#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

/// The largest of this lane's logits (-inf when it has none; NaNs skipped here, they
/// reach the loss through the sums).
TANDEM_HD double ceLaneMax(const float* row, int64_t classes, int lane, int lanes) {
  double m = -INFINITY;
  for (int64_t j = lane; j < classes; j += lanes) {
    const double v = row[j];
    m = v > m ? v : m;
  }
  return m;
}

/// sum(exp(x - max)) and sum(x) over this lane's logits, in class order.
struct CeLaneSums {
  double exp_sum, sum;
};
TANDEM_HD CeLaneSums ceLaneSums(const float* row, int64_t classes, double max, int lane,
                                int lanes) {
  CeLaneSums s{0.0, 0.0};
  for (int64_t j = lane; j < classes; j += lanes) {
    const double v = row[j];
    s.exp_sum += ::exp(v - max);
    s.sum += v;
  }
  return s;
}

/// The row's log-sum-exp from its maximum and shifted exp sum.
TANDEM_HD double ceLogSumExp(double max, double exp_sum) { return max + ::log(exp_sum); }

/// The row's loss (label >= 0); NaN for a label past the last class.
TANDEM_HD double ceRowLoss(const float* row, int64_t classes, int32_t label, double lse, double sum,
                           double smoothing) {
  if (label >= classes) return NAN;
  const double x_label = row[label];
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

}  // namespace tandem::backend
