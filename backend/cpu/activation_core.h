#pragma once

// Elementwise activations on oneDNN eltwise primitives: gelu (erf and tanh forms), tanh
// and sigmoid, forward and backward, f32 or bf16 (computed in f32 inside the primitive,
// rounded once when stored). Why oneDNN rather than a loop as relu has: these need erf,
// tanh and exp per element, which GCC does not vectorize from libm, while oneDNN's jit
// evaluates them 16 lanes wide (bench/transformer_cores_bench: gelu at ViT's MLP shape).
//
// Backward: gelu's reads the forward's input x; tanh's and sigmoid's read its output y
// (oneDNN's *_use_dst_for_bwd forms: dx = dy (1 - y^2), dy y (1 - y)), so the op keeps y,
// which its consumer keeps anyway, and not x.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/activation.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/dnnl_util.h"
#include "ir/types.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {

/// The kind (backend/activation.h, shared with the CUDA kernels).
using backend::Activation;

/// The oneDNN algorithm of `a`'s forward pass, and of its backward pass (which reads y
/// for tanh and sigmoid, x for gelu).
dnnl::algorithm forwardAlgorithm(Activation a);
dnnl::algorithm backwardAlgorithm(Activation a);

/// y = a(x) over n elements of `type` (f32 or bf16).
class ActivationForward {
 public:
  static absl::StatusOr<ActivationForward> make(CpuContext& ctx, Activation a, ir::DType type,
                                                int64_t n, absl::string_view where);
  /// y may be x (in place).
  void run(const void* x, void* y);
  const std::string& implementations() const { return program_.implementations(); }

 private:
  explicit ActivationForward(DnnlProgram p) : program_(std::move(p)) {}
  DnnlProgram program_;
};

/// dx = dy * a'(x), from `saved`: the forward's output y for tanh and sigmoid, its input
/// x for gelu (backwardReadsOutput). dx may be dy.
class ActivationBackward {
 public:
  static absl::StatusOr<ActivationBackward> make(CpuContext& ctx, Activation a, ir::DType type,
                                                 int64_t n, absl::string_view where);
  void run(const void* saved, const void* dy, void* dx);
  const std::string& implementations() const { return program_.implementations(); }

 private:
  explicit ActivationBackward(DnnlProgram p) : program_(std::move(p)) {}
  DnnlProgram program_;
};

}  // namespace tandem::backend::cpu
