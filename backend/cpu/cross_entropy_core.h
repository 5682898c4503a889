#pragma once

// Softmax cross-entropy with label smoothing, class weights and an ignored label over f32
// logits whose classes are on any axis, and i32 labels of the logits' shape less that
// axis, forward and backward: backend/cross_entropy_math.h's per-row math with one lane,
// in double. A loop of our own, as the unsmoothed loss is: C is small (10 classes)
// and the rows are a device's batch, so this costs nothing next to the layers, and
// oneDNN has no loss primitive. Targets with a negative label or ignore_index count for
// nothing: no loss, zero gradient. The summed loss is divided by `divisor` (the global
// batch, for a mean whose gradients add up across devices, or the global total of the
// counted targets' weights that target_weight_sum gives).

#include <cstdint>

namespace tandem::backend::cpu {

struct CrossEntropySpec {
  /// The logits as [rows, classes, inner]: a target is (r, i), its label labels[r * inner
  /// + i], its classes `inner` floats apart ([N, C] and [B, T, V] flattened: inner = 1).
  int64_t rows = 0, classes = 0;
  double smoothing = 0.0;  // label_smoothing in [0, 1]
  double divisor = 1.0;
  int64_t inner = 1;
  int64_t ignore_index = -100;  // negative: nothing besides the negative labels
};

/// The targets' summed loss / divisor; `weight`: the class weights f32[classes] or null.
float crossEntropyForward(const CrossEntropySpec& s, const float* logits, const int32_t* labels,
                          const float* weight = nullptr);

/// dlogits = (softmax - target) * dloss / divisor, weighted as the loss.
void crossEntropyBackward(const CrossEntropySpec& s, const float* logits, const int32_t* labels,
                          float dloss, float* dlogits, const float* weight = nullptr);

/// target_weight_sum: sum over the counted targets of weight[label] (1 without weights).
float targetWeightSum(const int32_t* labels, int64_t count, int64_t ignore_index,
                      const float* weight, int64_t classes);

}  // namespace tandem::backend::cpu
