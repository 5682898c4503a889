#pragma once

// The elementwise activations of the transformer ops, named once for both backends (the
// CPU's oneDNN eltwise cores, the CUDA kernels' activation_math.h). Plain C++17: nvcc
// compiles it into the kernels.

#include <cstdint>

namespace tandem::backend {

enum class Activation : uint8_t {
  kGeluErf,   // x/2 (1 + erf(x / sqrt 2)): nn.GELU(), the ViT's
  kGeluTanh,  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): nn.GELU(approximate="tanh")
  kTanh,
  kSigmoid,
};

/// "gelu_erf", "gelu_tanh", "tanh", "sigmoid".
inline const char* activationName(Activation a) {
  switch (a) {
    case Activation::kGeluErf:
      return "gelu_erf";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kTanh:
      return "tanh";
    case Activation::kSigmoid:
      return "sigmoid";
  }
  return "?";
}

/// Whether the backward pass reads the forward's output y (tanh, sigmoid: dy (1 - y^2),
/// dy y (1 - y)) rather than its input x (gelu): an op keeps what its backward reads.
inline bool backwardReadsOutput(Activation a) {
  return a == Activation::kTanh || a == Activation::kSigmoid;
}

}  // namespace tandem::backend
