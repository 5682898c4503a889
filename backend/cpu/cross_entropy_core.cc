#include "backend/cpu/cross_entropy_core.h"

#include "backend/cross_entropy_math.h"

namespace tandem::backend::cpu {
namespace {

/// The row's log-sum-exp and the sum of its logits, one lane.
struct RowStats {
  double lse, sum;
};
RowStats rowStats(const float* row, int64_t classes) {
  const double max = ceLaneMax(row, classes, 0, 1);
  const CeLaneSums s = ceLaneSums(row, classes, max, 0, 1);
  return {ceLogSumExp(max, s.exp_sum), s.sum};
}

}  // namespace

float crossEntropyForward(const CrossEntropySpec& s, const float* logits, const int32_t* labels) {
  double loss = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    if (labels[r] < 0) continue;
    const float* row = logits + r * s.classes;
    const RowStats st = rowStats(row, s.classes);
    loss += ceRowLoss(row, s.classes, labels[r], st.lse, st.sum, s.smoothing);
  }
  return static_cast<float>(loss / s.divisor);
}

void crossEntropyBackward(const CrossEntropySpec& s, const float* logits, const int32_t* labels,
                          float dloss, float* dlogits) {
  const double scale = static_cast<double>(dloss) / s.divisor;
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* row = logits + r * s.classes;
    float* drow = dlogits + r * s.classes;
    const int32_t label = labels[r];
    if (label < 0) {
      for (int64_t j = 0; j < s.classes; ++j) drow[j] = 0.0f;
      continue;
    }
    const RowStats st = rowStats(row, s.classes);
    for (int64_t j = 0; j < s.classes; ++j)
      drow[j] = ceGrad(row[j], j == label, st.lse, s.smoothing, s.classes, scale);
  }
}

}  // namespace tandem::backend::cpu
