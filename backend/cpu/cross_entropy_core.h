#pragma once

// Softmax cross-entropy with label smoothing over [rows, classes] f32 logits and i32
// labels, forward and backward: backend/cross_entropy_math.h's per-row math with one
// lane, in double. A loop of our own, as the unsmoothed loss is: C is small (10 classes)
// and the rows are a device's batch, so this costs nothing next to the layers, and
// oneDNN has no loss primitive. Rows with a negative label are padding: no loss, zero
// gradient. The summed loss is divided by `divisor` (the global batch, for a mean whose
// gradients add up across devices).

#include <cstdint>

namespace tandem::backend::cpu {

struct CrossEntropySpec {
  int64_t rows = 0, classes = 0;
  double smoothing = 0.0;  // label_smoothing in [0, 1]
  double divisor = 1.0;
};

/// The rows' summed loss / divisor.
float crossEntropyForward(const CrossEntropySpec& s, const float* logits, const int32_t* labels);

/// dlogits = (softmax - target) * dloss / divisor.
void crossEntropyBackward(const CrossEntropySpec& s, const float* logits, const int32_t* labels,
                          float dloss, float* dlogits);

}  // namespace tandem::backend::cpu
