#pragma once

// Per-element math of the SGD update's own kernel (optimizer.cu), compiled for the GPU
// and by the host tests: the CPU's loop (backend/cpu/optimizer_kernels.cc) operation for
// operation, in f32 without fused multiply-adds on either side (CMakeLists.txt), so both
// backends step to the same bits.

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// The step's hyperparameters, as the node's attributes rounded to f32.
struct SgdParams {
  float lr, momentum, weight_decay;
};

/// What a launch is given: the attributes, and the device address of the schedule's
/// learning-rate factor when the node reads one (null: none). The factor changes every
/// step, so it is read where the kernel runs, not baked into a recorded launch.
struct SgdHyper {
  double lr;
  float momentum, weight_decay;
  const float* lr_factor;
};

/// The step's parameters: lr times the factor in double, rounded once (the CPU kernel's
/// scaledLr, backend/sgd_checks.h).
TANDEM_HD SgdParams sgdParamsAt(const SgdHyper& h) {
  const double lr = h.lr_factor == nullptr ? h.lr : h.lr * static_cast<double>(*h.lr_factor);
  return SgdParams{static_cast<float>(lr), h.momentum, h.weight_decay};
}

/// d = g + weight_decay * w; m = momentum * m + d; w -= lr * m (with a momentum buffer).
TANDEM_HD void sgdStep(float& w, float g, float& m, const SgdParams& p) {
  const float d = g + p.weight_decay * w;
  const float v = p.momentum * m + d;
  m = v;
  w -= p.lr * v;
}

/// w -= lr * (g + weight_decay * w) (momentum 0: no buffer).
TANDEM_HD void sgdStep(float& w, float g, const SgdParams& p) {
  w -= p.lr * (g + p.weight_decay * w);
}

}  // namespace tandem::backend::cuda
