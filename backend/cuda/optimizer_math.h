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

/// g + weight_decay * w; g itself without weight decay, as in PyTorch and the CPU's loop
/// (0 * w is NaN for an infinite weight).
TANDEM_HD float sgdGrad(float w, float g, const SgdParams& p) {
  return p.weight_decay != 0.0f ? g + p.weight_decay * w : g;
}

/// d = sgdGrad; m = momentum * m + d; w -= lr * m (with a momentum buffer).
TANDEM_HD void sgdStep(float& w, float g, float& m, const SgdParams& p) {
  const float d = sgdGrad(w, g, p);
  const float v = p.momentum * m + d;
  m = v;
  w -= p.lr * v;
}

/// w -= lr * sgdGrad (momentum 0: no buffer).
TANDEM_HD void sgdStep(float& w, float g, const SgdParams& p) { w -= p.lr * sgdGrad(w, g, p); }

}  // namespace tandem::backend::cuda
