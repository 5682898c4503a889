#pragma once

// The per-element math of the ops of class pointwise_loss (ir/ops.td: mse_loss, l1_loss,
// smooth_l1_loss, bce_with_logits) and their backward ops, compiled for the GPU
// (backend/cuda/pointwise_loss.cu), for the CPU backend (backend/cpu/pointwise_loss_kernels.cc)
// and by the host tests. Each struct NameMath has
//
//   forward(x, t, p)         the element's loss, in double (the kernels sum in double)
//   backward(x, t, p, scale) d loss / d x times scale = dloss / divisor, rounded to float once
//
// p is the op's parameter for the element: smooth_l1_loss's beta, bce_with_logits' pos_weight
// for the element, unused by the others; defaultParam(beta) is p when the op gives none
// per element (beta, a pos_weight of 1, or 0).
// The formulas are PyTorch 1.13's (aten/src/ATen/native/Loss.cpp, PointwiseOps), term for
// term, in double.

#include <cmath>

#include "backend/host_device.h"
#include "ir/kernel_ops.h"

namespace tandem::backend {

/// nn.MSELoss: (x - t)^2; its gradient 2 (x - t).
struct MseLossMath {
  static TANDEM_HD double defaultParam(double) { return 0.0; }
  static TANDEM_HD double forward(float x, float t, double) {
    const double d = static_cast<double>(x) - static_cast<double>(t);
    return d * d;
  }
  static TANDEM_HD float backward(float x, float t, double, double scale) {
    const double d = static_cast<double>(x) - static_cast<double>(t);
    return static_cast<float>(2.0 * d * scale);
  }
};

/// sign(d) as PyTorch's (x > 0) - (x < 0): 0 at 0 and for NaN too.
TANDEM_HD double lossSign(double d) { return d > 0.0 ? 1.0 : d < 0.0 ? -1.0 : 0.0; }

/// nn.L1Loss: |x - t|; its gradient sign(x - t) (0 where they are equal).
struct L1LossMath {
  static TANDEM_HD double defaultParam(double) { return 0.0; }
  static TANDEM_HD double forward(float x, float t, double) {
    return ::fabs(static_cast<double>(x) - static_cast<double>(t));
  }
  static TANDEM_HD float backward(float x, float t, double, double scale) {
    return static_cast<float>(lossSign(static_cast<double>(x) - static_cast<double>(t)) * scale);
  }
};

/// nn.SmoothL1Loss(beta): 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta = 0
/// is the L1 loss, except that PyTorch's gradient of a zero difference is then -1 (its
/// branches: d <= -beta gives -1 first).
struct SmoothL1LossMath {
  static TANDEM_HD double defaultParam(double beta) { return beta; }
  static TANDEM_HD double forward(float x, float t, double beta) {
    const double d = static_cast<double>(x) - static_cast<double>(t), a = ::fabs(d);
    if (beta == 0.0) return a;
    return a < beta ? 0.5 * d * d / beta : a - 0.5 * beta;
  }
  static TANDEM_HD float backward(float x, float t, double beta, double scale) {
    // PyTorch's branches, ties included: with beta = 0 a zero difference takes -1.
    const double d = static_cast<double>(x) - static_cast<double>(t);
    const double g = d <= -beta ? -1.0 : d >= beta ? 1.0 : d / beta;
    return static_cast<float>(g * scale);
  }
};

/// nn.BCEWithLogitsLoss(pos_weight=p): (1 - t) x + (1 + (p - 1) t) softplus(-x), with
/// softplus(-x) = log1p(exp(-|x|)) + max(-x, 0), finite for every finite x; its gradient
/// (1 + (p - 1) t) sigmoid(x) - p t.
struct BceWithLogitsMath {
  static TANDEM_HD double defaultParam(double) { return 1.0; }  // no pos_weight
  static TANDEM_HD double forward(float xf, float tf, double p) {
    const double x = xf, t = tf;
    const double softplus_neg = ::log1p(::exp(-::fabs(x))) + (x < 0.0 ? -x : 0.0);
    return (1.0 - t) * x + (1.0 + (p - 1.0) * t) * softplus_neg;
  }
  static TANDEM_HD float backward(float xf, float tf, double p, double scale) {
    const double x = xf, t = tf;
    const double sigmoid = 1.0 / (1.0 + ::exp(-x));
    return static_cast<float>(((1.0 + (p - 1.0) * t) * sigmoid - p * t) * scale);
  }
};

}  // namespace tandem::backend
