#include "backend/cpu/cross_entropy_core.h"

#include "backend/cross_entropy_math.h"

namespace tandem::backend::cpu {
namespace {

/// The row's log-sum-exp and the sum of its logits, one lane.
struct RowStats {
  double lse, sum;
};
RowStats rowStats(const float* row, int64_t classes, int64_t stride) {
  const double max = ceLaneMax(row, classes, 0, 1, stride);
  const CeLaneSums s = ceLaneSums(row, classes, max, 0, 1, stride);
  return {ceLogSumExp(max, s.exp_sum), s.sum};
}

/// Target r's row: its first class's logit (classes `inner` apart).
int64_t rowOffset(const CrossEntropySpec& s, int64_t r) {
  return (r / s.inner) * s.classes * s.inner + r % s.inner;
}

}  // namespace

float crossEntropyForward(const CrossEntropySpec& s, const float* logits, const int32_t* labels,
                          const float* weight) {
  const int64_t targets = s.rows * s.inner, stride = s.inner;
  const double wtotal = weight != nullptr ? ceWeightTotal(weight, s.classes) : 0.0;
  double loss = 0;
  for (int64_t r = 0; r < targets; ++r) {
    if (!ceCounts(labels[r], s.ignore_index)) continue;
    const float* row = logits + rowOffset(s, r);
    const RowStats st = rowStats(row, s.classes, stride);
    if (weight == nullptr) {
      loss += ceRowLoss(row, s.classes, labels[r], st.lse, st.sum, s.smoothing, stride);
    } else {
      const double wsum = ceLaneWeightedSum(row, weight, s.classes, 0, 1, stride);
      loss += ceRowLossWeighted(row, weight, s.classes, labels[r], st.lse, wsum, wtotal,
                                s.smoothing, stride);
    }
  }
  return static_cast<float>(loss / s.divisor);
}

void crossEntropyBackward(const CrossEntropySpec& s, const float* logits, const int32_t* labels,
                          float dloss, float* dlogits, const float* weight) {
  const double scale = static_cast<double>(dloss) / s.divisor;
  const int64_t targets = s.rows * s.inner, stride = s.inner;
  const double wtotal = weight != nullptr ? ceWeightTotal(weight, s.classes) : 0.0;
  for (int64_t r = 0; r < targets; ++r) {
    const float* row = logits + rowOffset(s, r);
    float* drow = dlogits + rowOffset(s, r);
    const int32_t label = labels[r];
    if (!ceCounts(label, s.ignore_index)) {
      for (int64_t j = 0; j < s.classes; ++j) drow[j * stride] = 0.0f;
      continue;
    }
    const RowStats st = rowStats(row, s.classes, stride);
    if (weight == nullptr) {
      for (int64_t j = 0; j < s.classes; ++j)
        drow[j * stride] =
            ceGrad(row[j * stride], j == label, st.lse, s.smoothing, s.classes, scale);
      continue;
    }
    // A label past the last class has no weight: NaN, as its loss.
    const double w_label = label < s.classes ? static_cast<double>(weight[label]) : NAN;
    for (int64_t j = 0; j < s.classes; ++j)
      drow[j * stride] = ceGradWeighted(row[j * stride], j == label, weight[j], w_label, wtotal,
                                        st.lse, s.smoothing, s.classes, scale);
  }
}

float targetWeightSum(const int32_t* labels, int64_t count, int64_t ignore_index,
                      const float* weight, int64_t classes) {
  double total = 0;
  for (int64_t r = 0; r < count; ++r)
    total += ceTargetWeight(labels[r], ignore_index, weight, classes);
  return static_cast<float>(total);
}

}  // namespace tandem::backend::cpu
