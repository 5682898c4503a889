#pragma once

// The unary float ops' per-element math, compiled for the GPU (elementwise.cu) and by the
// host tests, which check it against the CPU kernels: forward y = f(x), and the backward
// op's dx = g(dy, v), where v is what the spec's backward op reads beside dy (the forward
// output for relu, sigmoid and tanh; the input for gelu). Each computes in float (bf16
// operands widened exactly, a bf16 result rounded once where it is stored: host_device.h).
//
// A new unary op is its struct here and its line in TANDEM_CUDA_UNARY_OPS: elementwise.cu
// instantiates its kernels and elementwise_kernels.cc its two factories from the list.

#include <cmath>

#include "backend/cuda/elementwise_math.h"
#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// 1/sqrt(2), 1/sqrt(2 pi), sqrt(2/pi) and gelu_tanh's cubic coefficient, rounded to float.
inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;
inline constexpr float kGeluTanhCubic = 0.044715f;

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

/// X(Name) for every unary op NameMath above; the spec's ops are `name` and `name_backward`.
#define TANDEM_CUDA_UNARY_OPS(X) X(Relu) X(Sigmoid) X(Gelu) X(GeluTanh) X(Tanh)

}  // namespace tandem::backend::cuda
