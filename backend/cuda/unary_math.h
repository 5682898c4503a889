#pragma once

// The per-element math of the ops of class unary_elementwise (ir/ops.td), compiled for the
// GPU (elementwise.cu), for the CPU backend (its loop kernel, for the ops it does not run
// as oneDNN primitives) and by the host tests: forward y = f(x), and the backward op's
// dx = g(dy, v), where v is what the spec's `grad reads` says its backward op reads beside
// dy (the forward output for relu, sigmoid and tanh; the input for gelu and softsign).
// Each computes in float (bf16 operands widened exactly, a bf16 result rounded once where
// it is stored: host_device.h).
//
// A new unary op is its stanza in ir/ops.td and its NameMath struct here: the spec's list
// of the class (TANDEM_UNARY_ELEMENTWISE_OPS) instantiates both backends' kernels and
// factories, and a missing struct does not compile.

#include "backend/cuda/activation_math.h"
#include "backend/cuda/elementwise_math.h"
#include "backend/cuda/host_device.h"
#include "ir/kernel_ops.h"

namespace tandem::backend::cuda {

/// relu: max(x, 0); its backward passes dy where the output is positive.
struct ReluMath {
  static TANDEM_HD float forward(float x) { return reluValue(x); }
  static TANDEM_HD float backward(float dy, float y) { return reluBackwardValue(dy, y); }
};

/// sigmoid: 1 / (1 + exp(-x)); its backward dy * y * (1 - y) from the output.
struct SigmoidMath {
  static TANDEM_HD float forward(float x) { return 1.0f / (1.0f + expf(-x)); }
  static TANDEM_HD float backward(float dy, float y) { return dy * y * (1.0f - y); }
};

/// gelu (erf form) and gelu_tanh: activation_math.h's, whose backward reads the input x.
struct GeluMath {
  static TANDEM_HD float forward(float x) { return geluErf(x); }
  static TANDEM_HD float backward(float dy, float x) { return geluErfGrad(dy, x); }
};
struct GeluTanhMath {
  static TANDEM_HD float forward(float x) { return geluTanh(x); }
  static TANDEM_HD float backward(float dy, float x) { return geluTanhGrad(dy, x); }
};

/// tanh; its backward dy * (1 - y^2) from the output.
struct TanhMath {
  static TANDEM_HD float forward(float x) { return tanhValue(x); }
  static TANDEM_HD float backward(float dy, float y) { return tanhGradFromY(dy, y); }
};

/// softsign: x / (1 + |x|). Its backward is PyTorch 1.13's autograd of x / (x.abs() + 1),
/// term for term: dy / d + (-dy * (x / d / d)) * sgn(x), d = 1 + |x|, so that an infinite x
/// gives NaN there too (inf / inf), not the 0 of the simplified dy / d^2.
struct SoftsignMath {
  static TANDEM_HD float forward(float x) { return x / (1.0f + fabsf(x)); }
  static TANDEM_HD float backward(float dy, float x) {
    const float d = 1.0f + fabsf(x);
    const float sign = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;  // 0 and NaN stay
    return dy / d + -dy * (x / d / d) * sign;
  }
};

/// X(Name) for every op NameMath above: the spec's class unary_elementwise, whose ops are
/// `name` and `name_backward`.
#define TANDEM_CUDA_UNARY_OPS(X) TANDEM_UNARY_ELEMENTWISE_OPS(X)

}  // namespace tandem::backend::cuda
