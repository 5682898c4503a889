#pragma once

// The per-element math of the ops of class unary_elementwise (ir/ops.td), compiled for the
// GPU (backend/cuda/elementwise.cu), for the CPU backend (its loop kernel, for the ops it
// does not run as oneDNN primitives) and by the host tests: forward y = f(x), and the
// backward op's dx = g(dy, v), where v is what the spec's `grad reads` says its backward op
// reads beside dy (the forward output for relu, sigmoid and tanh; the input for gelu and
// softsign). Each computes in float (bf16 operands widened exactly, a bf16 result rounded
// once where it is stored). In backend/ rather than backend/cuda/ because both backends
// run it, and a CPU-only build needs nothing of the CUDA backend (TANDEM_HD:
// backend/host_device.h).
//
// A new unary op is its stanza in ir/ops.td and its NameMath struct here: the spec's list
// of the class (TANDEM_UNARY_ELEMENTWISE_OPS, ir/kernel_ops.h) instantiates both backends'
// kernels and factories, and a missing struct does not compile.

#include <cmath>

#include "backend/host_device.h"
#include "ir/kernel_ops.h"

namespace tandem::backend {

/// 1/sqrt(2), 1/sqrt(2 pi), sqrt(2/pi) and gelu_tanh's cubic coefficient, rounded to float.
inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;
inline constexpr float kGeluTanhCubic = 0.044715f;

/// relu: max(x, 0) as PyTorch's clamp_min and the CPU write it (a NaN stays NaN, -0
/// stays -0).
TANDEM_HD float reluValue(float x) { return x < 0.0f ? 0.0f : x; }

/// relu_backward: PyTorch's threshold_backward, dy unless relu's output y <= 0 (y > 0
/// exactly where x > 0; a NaN output passes dy).
TANDEM_HD float reluBackwardValue(float dy, float y) { return y <= 0.0f ? 0.0f : dy; }

/// relu: max(x, 0); its backward passes dy where the output is positive.
struct ReluMath {
  static TANDEM_HD float forward(float x) { return reluValue(x); }
  static TANDEM_HD float backward(float dy, float y) { return reluBackwardValue(dy, y); }
};

/// sigmoid: 1 / (1 + exp(-x)); its backward dy * y * (1 - y) from the output.
struct SigmoidMath {
  static TANDEM_HD float forward(float x) { return 1.0f / (1.0f + ::expf(-x)); }
  static TANDEM_HD float backward(float dy, float y) { return dy * y * (1.0f - y); }
};

/// gelu (erf form): x/2 (1 + erf(x / sqrt 2)); its backward dy (Phi(x) + x phi(x)) from
/// the input x.
struct GeluMath {
  static TANDEM_HD float forward(float x) { return 0.5f * x * (1.0f + ::erff(x * kInvSqrt2)); }
  static TANDEM_HD float backward(float dy, float x) {
    const float cdf = 0.5f * (1.0f + ::erff(x * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * ::expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};

/// gelu_tanh: x/2 (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3)); its backward
/// dy ((1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)) from the input x.
struct GeluTanhMath {
  static TANDEM_HD float forward(float x) {
    const float inner = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
    return 0.5f * x * (1.0f + ::tanhf(inner));
  }
  static TANDEM_HD float backward(float dy, float x) {
    const float inner = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
    const float t = ::tanhf(inner);
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner);
  }
};

/// tanh; its backward dy * (1 - y^2) from the output.
struct TanhMath {
  static TANDEM_HD float forward(float x) { return ::tanhf(x); }
  static TANDEM_HD float backward(float dy, float y) { return dy * (1.0f - y * y); }
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

/// min(max(t, 0), 6) as PyTorch's std::min / std::max write it: a NaN stays NaN.
TANDEM_HD float clampToSix(float t) {
  t = t < 0.0f ? 0.0f : t;
  return 6.0f < t ? 6.0f : t;
}

/// hardswish: x * min(max(x + 3, 0), 6) / 6 (so -inf gives -inf * 0 = NaN, as PyTorch's);
/// its backward PyTorch's hardswish_backward: 0 below -3, dy above 3, dy (x / 3 + 1/2)
/// between, and NaN for a NaN x (its vectorized kernel's middle branch).
struct HardswishMath {
  static TANDEM_HD float forward(float x) { return x * clampToSix(x + 3.0f) / 6.0f; }
  static TANDEM_HD float backward(float dy, float x) {
    if (x < -3.0f) return 0.0f;
    if (x > 3.0f) return dy;
    return dy * (x / 3.0f + 0.5f);
  }
};

/// hardsigmoid: min(max(x + 3, 0), 6) / 6; its backward dy / 6 strictly inside (-3, 3).
struct HardsigmoidMath {
  static TANDEM_HD float forward(float x) { return clampToSix(x + 3.0f) / 6.0f; }
  static TANDEM_HD float backward(float dy, float x) {
    return x > -3.0f && x < 3.0f ? dy * (1.0f / 6.0f) : 0.0f;
  }
};

/// relu6: min(max(x, 0), 6); its backward hardtanh_backward's: dy strictly inside (0, 6),
/// else 0 (a NaN x too).
struct Relu6Math {
  static TANDEM_HD float forward(float x) { return clampToSix(x); }
  static TANDEM_HD float backward(float dy, float x) { return x > 0.0f && x < 6.0f ? dy : 0.0f; }
};

/// torch.sign: -1, 0 or 1; 0 for -0 and for NaN (PyTorch 1.13's sign and sgn of a float).
TANDEM_HD float signValue(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f; }

/// silu: x / (1 + exp(-x)) as PyTorch's kernel writes it; its backward silu_backward's
/// dy * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x)).
struct SiluMath {
  static TANDEM_HD float forward(float x) { return x / (1.0f + ::expf(-x)); }
  static TANDEM_HD float backward(float dy, float x) {
    const float s = 1.0f / (1.0f + ::expf(-x));
    return dy * s * (1.0f + x * (1.0f - s));
  }
};

/// softplus (beta 1, threshold 20, nn.Softplus's): x above 20, else log1p(exp(x)); its
/// backward softplus_backward's dy above 20, else dy * z / (z + 1), z = exp(x).
struct SoftplusMath {
  static TANDEM_HD float forward(float x) { return x > 20.0f ? x : ::log1pf(::expf(x)); }
  static TANDEM_HD float backward(float dy, float x) {
    const float z = ::expf(x);
    return x > 20.0f ? dy : dy * z / (z + 1.0f);
  }
};

/// exp; its backward dy * y from the output (PyTorch's grad * result).
struct ExpMath {
  static TANDEM_HD float forward(float x) { return ::expf(x); }
  static TANDEM_HD float backward(float dy, float y) { return dy * y; }
};

/// log; its backward dy / x (PyTorch's grad.div(self)).
struct LogMath {
  static TANDEM_HD float forward(float x) { return ::logf(x); }
  static TANDEM_HD float backward(float dy, float x) { return dy / x; }
};

/// sqrt; its backward dy / (2 y) from the output (PyTorch's grad / (2 * result)).
struct SqrtMath {
  static TANDEM_HD float forward(float x) { return ::sqrtf(x); }
  static TANDEM_HD float backward(float dy, float y) { return dy / (2.0f * y); }
};

/// 1 / x; its backward -dy * y^2 from the output (PyTorch's -grad * (result * result)).
struct ReciprocalMath {
  static TANDEM_HD float forward(float x) { return 1.0f / x; }
  static TANDEM_HD float backward(float dy, float y) { return -dy * (y * y); }
};

/// erf; its backward PyTorch's 2 / sqrt(pi) * exp(-x^2) * dy.
struct ErfMath {
  static TANDEM_HD float forward(float x) { return ::erff(x); }
  static TANDEM_HD float backward(float dy, float x) {
    return 1.12837916709551257f * ::expf(-(x * x)) * dy;
  }
};

/// |x|; its backward dy * sgn(x) (0 at 0 and at NaN).
struct AbsMath {
  static TANDEM_HD float forward(float x) { return ::fabsf(x); }
  static TANDEM_HD float backward(float dy, float x) { return dy * signValue(x); }
};

/// The steps: their gradient is 0 everywhere (PyTorch's zeros_like(grad), NaN dy too).
struct SignMath {
  static TANDEM_HD float forward(float x) { return signValue(x); }
  static TANDEM_HD float backward(float, float) { return 0.0f; }
};
struct FloorMath {
  static TANDEM_HD float forward(float x) { return ::floorf(x); }
  static TANDEM_HD float backward(float, float) { return 0.0f; }
};
struct CeilMath {
  static TANDEM_HD float forward(float x) { return ::ceilf(x); }
  static TANDEM_HD float backward(float, float) { return 0.0f; }
};

/// clip: min(max(x, lo), hi) as torch.clamp writes it (std::min(std::max(x, lo), hi): a
/// NaN x stays NaN; lo above hi gives hi); its backward clamp_backward's dy where lo <= x
/// <= hi, else 0 (NaN x too).
TANDEM_HD float clipValue(float x, float lo, float hi) {
  const float t = x < lo ? lo : x;
  return hi < t ? hi : t;
}
TANDEM_HD float clipBackwardValue(float dy, float x, float lo, float hi) {
  return x >= lo && x <= hi ? dy : 0.0f;
}

}  // namespace tandem::backend
