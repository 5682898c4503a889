#pragma once

// The unary float ops' per-element math, compiled for the GPU (elementwise.cu) and by the
// host tests, which check it against the CPU kernels: forward y = f(x), and the backward
// op's dx = g(dy, v), where v is what the spec's backward op reads beside dy (the forward
// output for relu, sigmoid and tanh; the input for gelu). Each computes in float (bf16
// operands widened exactly, a bf16 result rounded once where it is stored: host_device.h).
//
// A new unary op is its struct here and its line in TANDEM_CUDA_UNARY_OPS: elementwise.cu
// instantiates its kernels and elementwise_kernels.cc its two factories from the list.

#include "backend/cuda/activation_math.h"
#include "backend/cuda/elementwise_math.h"
#include "backend/cuda/host_device.h"

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

/// X(Name) for every unary op NameMath above; the spec's ops are `name` and `name_backward`.
#define TANDEM_CUDA_UNARY_OPS(X) X(Relu) X(Sigmoid) X(Gelu) X(GeluTanh) X(Tanh)

}  // namespace tandem::backend::cuda
