#pragma once

// Per-row math of the loss family's own kernels (loss.cu), compiled for the GPU and by
// the host tests. A row of logits is shared by `lanes` threads (a warp: lane l takes
// classes l, l + lanes, ...); each lane's partial max and partial sum are combined across
// the warp by a butterfly whose order is fixed, so every run gives the same bits. With
// lanes = 1 the functions are the CPU's loops exactly (backend/cpu/loss_kernels.cc): the
// log-sum-exp in double, shifted by the row's maximum.

#include <cmath>
#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// The largest of this lane's logits as a double (-inf when it has none). NaNs are
/// skipped here; they reach the loss through laneExpSum, which makes it NaN, as the
/// CPU's is.
TANDEM_HD double laneMax(const float* row, int64_t classes, int lane, int lanes) {
  double m = -INFINITY;
  for (int64_t j = lane; j < classes; j += lanes) {
    const double v = row[j];
    m = v > m ? v : m;
  }
  return m;
}

/// sum(exp(x - max)) over this lane's logits, in double and in class order.
TANDEM_HD double laneExpSum(const float* row, int64_t classes, double max, int lane, int lanes) {
  double s = 0;
  for (int64_t j = lane; j < classes; j += lanes) s += ::exp(static_cast<double>(row[j]) - max);
  return s;
}

/// log(sum(exp(row))) from the row's maximum and its shifted sum.
TANDEM_HD double logSumExpOf(double max, double sum) { return max + ::log(sum); }

/// A row's loss: -log(softmax(row)[label]) = lse - row[label]. A label past the last
/// class is a data bug (the CPU only asserts); here it makes the loss NaN, not a read
/// out of bounds.
TANDEM_HD double rowLoss(const float* row, int64_t classes, int32_t label, double lse) {
  return label < classes ? lse - static_cast<double>(row[label]) : NAN;
}

/// dlogits[j] = (softmax(row)[j] - onehot(label)[j]) * scale, rounded to float once, as
/// the CPU computes it; scale = dloss / divisor.
TANDEM_HD float softmaxGrad(float x, bool is_label, double lse, double scale) {
  const double p = ::exp(static_cast<double>(x) - lse);
  return static_cast<float>((p - (is_label ? 1.0 : 0.0)) * scale);
}

/// The arg-max candidate of a lane: its first largest logit (index -1 when it has none).
/// NaNs never win; accuracy's kernel handles a NaN in class 0 itself (the CPU's loop
/// then keeps class 0).
struct ArgMax {
  float value;
  int64_t index;
};

/// The better of two candidates: the larger value, the smaller index on a tie (the CPU's
/// "first maximum wins"). Either may be empty (index -1).
TANDEM_HD ArgMax betterOf(ArgMax a, ArgMax b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

TANDEM_HD ArgMax laneArgMax(const float* row, int64_t classes, int lane, int lanes) {
  ArgMax best{0.0f, -1};
  for (int64_t j = lane; j < classes; j += lanes) {
    const float v = row[j];
    if (v != v) continue;  // NaN
    if (best.index < 0 || v > best.value) best = {v, j};
  }
  return best;
}

/// The row's predicted class as the CPU's loop picks it: the first maximum, scanning from
/// class 0; a NaN in class 0 is never beaten (nothing compares greater), one elsewhere
/// never wins. `best` combines every lane's laneArgMax.
TANDEM_HD int64_t predictedClass(const float* row, ArgMax best) {
  const float first = row[0];
  if (first != first || best.index < 0) return 0;
  return best.index;
}

}  // namespace tandem::backend::cuda
