#pragma once

// Per-row math of accuracy's own kernel (loss.cu), compiled for the GPU and by the host
// tests. A row of logits is shared by `lanes` threads (a warp: lane l takes classes l,
// l + lanes, ...); the lanes' candidates are combined across the warp by a butterfly
// whose order is fixed, so every run gives the same bits and the CPU's class
// (backend/cpu/loss_kernels.cc). The cross-entropy's math is backend/cross_entropy_math.h.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

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
