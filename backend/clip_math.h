#pragma once

// clip_grad_norm's factor (torch.nn.utils.clip_grad_norm_ with the 2-norm): the sum of
// every gradient element's square, in double, gives the norm n; the gradients are scaled
// by min(1, max_norm / (n + 1e-6)), made in double and rounded to float once. Host and
// device: the CPU kernel sums in element order, the CUDA kernel in a fixed tree of
// blocks, so each backend makes the same factor on every device (all read the same
// all-reduced gradients), which is what keeps the replicas equal. Non-finite gradients as
// in PyTorch 1.13: an inf makes the norm inf and the factor 0 (finite gradients become
// zeros, infinite ones NaN); a NaN makes the factor, and so every gradient, NaN.

#include <cmath>

#include "backend/host_device.h"

namespace tandem::backend {

/// PyTorch's epsilon beside the norm.
inline constexpr double kClipEpsilon = 1e-6;

TANDEM_HD float clipFactor(double max_norm, double sum_of_squares) {
#if defined(__CUDA_ARCH__)
  const double norm = ::sqrt(sum_of_squares);
#else
  const double norm = std::sqrt(sum_of_squares);
#endif
  const double f = max_norm / (norm + kClipEpsilon);
  // PyTorch's clamp(f, max=1): a NaN norm (a NaN gradient) makes every gradient NaN, as
  // clip_grad_norm_ does without error_if_nonfinite (f < 1 ? f : 1 made the factor 1).
  return static_cast<float>(f > 1.0 ? 1.0 : f);
}

}  // namespace tandem::backend
