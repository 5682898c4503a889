#pragma once

// AdamW's update (Loshchilov and Hutter, "Decoupled weight decay regularization") as
// PyTorch 1.13's torch.optim.AdamW computes it (_single_tensor_adamw, amsgrad off):
//
//   w  = w * (1 - lr * weight_decay)                 decoupled decay, before the step
//   m  = m * beta1 + (1 - beta1) * g
//   v  = v * beta2 + (1 - beta2) * g * g
//   w += -lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// with eps outside the square root, after the bias correction, and t the update's number
// counted from 1. The per-step scalars are computed in double and rounded to float once,
// as PyTorch passes Python floats to its f32 tensor ops (on the host for the CPU; on the
// GPU from the step count in device memory, with CUDA's pow: within 2 ulp of the host's
// in double, which the rounding to float almost always absorbs); the per-element work
// is float, operation for operation in PyTorch's order, without fused multiply-adds
// (CMakeLists.txt), so the CPU loop and the CUDA kernel step to the same bits. The state
// (m, v) and the weight are f32 whatever the gradient's type (bf16 under mixed precision
// or a bf16 all-reduce: read exactly into float).

#include <cmath>
#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;  // PyTorch's defaults
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

/// One step's scalars, each rounded to float once.
struct AdamWScalars {
  float decay;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^t)
};

/// The scalars of update number `step` (1 for the first update), made per launch (the lr
/// may change every step under a schedule; the step does). Host and device: adamw_update's
/// CUDA kernel makes them from the step count it keeps in device memory.
TANDEM_HD AdamWScalars adamwScalars(const AdamWHyper& h, int64_t step) {
  const double t = static_cast<double>(step);
#if defined(__CUDA_ARCH__)
  const double bias1 = 1.0 - ::pow(h.beta1, t);
  const double bias2_sqrt = ::sqrt(1.0 - ::pow(h.beta2, t));
#else
  const double bias1 = 1.0 - std::pow(h.beta1, t);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(h.beta2, t));
#endif
  return {static_cast<float>(1.0 - h.lr * h.weight_decay),
          static_cast<float>(h.beta1),
          static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),
          static_cast<float>(1.0 - h.beta2),
          static_cast<float>(bias2_sqrt),
          static_cast<float>(h.eps),
          static_cast<float>(-(h.lr / bias1))};
}

/// adamw_update's scalars from its state as a launch reads it: `count` the parameter's
/// update count before this update (the f32[1] state), `lr_factor` the schedule's
/// learning-rate factor or null (lr times it in double, as the CPU kernel does).
TANDEM_HD AdamWScalars adamwScalarsAt(AdamWHyper h, const float* lr_factor, float count) {
  if (lr_factor != nullptr) h.lr *= static_cast<double>(*lr_factor);
  return adamwScalars(h, static_cast<int64_t>(count) + 1);
}

/// One element's update, in place.
TANDEM_HD void adamwStep(float& w, float g, float& m, float& v, const AdamWScalars& s) {
  w = w * s.decay;
  m = m * s.beta1 + g * s.one_minus_beta1;
  v = v * s.beta2 + s.one_minus_beta2 * g * g;
#if defined(__CUDA_ARCH__)
  const float root = __fsqrt_rn(v);  // IEEE-rounded, as std::sqrt on the host
#else
  const float root = std::sqrt(v);
#endif
  const float denom = root / s.bias2_sqrt + s.eps;
  w = w + s.neg_step_size * m / denom;
}

}  // namespace tandem::backend
