#pragma once

// Per-row math of accuracy's own kernel (loss.cu), compiled for the GPU and by the host
// tests. A row of logits is shared by `lanes` threads (a warp: lane l takes classes l,
// l + lanes, ...); the lanes' candidates are combined across the warp by a butterfly
// whose order is fixed, so every run gives the same bits and the CPU's class
// (backend/cpu/loss_kernels.cc). The cross-entropy's math is backend/cross_entropy_math.h.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// The arg-max candidate of a lane: its first NaN, else its first largest logit (index -1
/// when it has none). PyTorch's argmax (and the CPU's accuracy) takes a NaN as the largest
/// value, so the row's first NaN is its class.
struct ArgMax {
  float value;
  int64_t index;
};

/// The better of two candidates: a NaN over any number, else the larger value; between
/// two NaNs or two equal values the smaller index (the CPU's "first maximum wins"). Either
/// may be empty (index -1).
TANDEM_HD ArgMax betterOf(ArgMax a, ArgMax b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan || b_nan) return a_nan && b_nan ? (b.index < a.index ? b : a) : (a_nan ? a : b);
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

TANDEM_HD ArgMax laneArgMax(const float* row, int64_t classes, int lane, int lanes) {
  ArgMax best{0.0f, -1};
  for (int64_t j = lane; j < classes; j += lanes) {
    const float v = row[j];
    if (v != v) return {v, j};  // the lane's first NaN: nothing later beats it
    if (best.index < 0 || v > best.value) best = {v, j};
  }
  return best;
}

/// The row's predicted class from every lane's laneArgMax combined (class 0 for a row
/// without classes).
TANDEM_HD int64_t predictedClass(ArgMax best) { return best.index < 0 ? 0 : best.index; }

}  // namespace tandem::backend::cuda
