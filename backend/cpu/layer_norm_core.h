#pragma once

// Layer normalization with a learned scale and shift (nn.LayerNorm with
// elementwise_affine) over the last dimension of a [rows, width] tensor, on oneDNN's
// layer_normalization primitives:
//   y = (x - mean) / sqrt(var + eps) * gamma + beta, per row, var biased.
// The forward pass returns each row's mean and variance (f32 [rows]), which the backward
// pass reads instead of recomputing them. x, y, dy and dx are f32 or bf16 (mixed
// precision: statistics, gamma, beta and their gradients stay f32). Why oneDNN here, when
// batch norm is a loop: a layer norm's rows are contiguous in the plain layout, which
// oneDNN's jit lnorm takes as it is (bench/transformer_cores_bench).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/dnnl_util.h"
#include "ir/types.h"

namespace tandem::backend::cpu {

struct LayerNormSpec {
  int64_t rows = 0, width = 0;
  ir::DType data = ir::DType::kF32;  // x, y, dy, dx
  float epsilon = 1e-5f;             // PyTorch's default
};

class LayerNormForward {
 public:
  static absl::StatusOr<LayerNormForward> make(CpuContext& ctx, const LayerNormSpec& spec,
                                               absl::string_view where);
  /// y = layer_norm(x) * gamma + beta; mean and var receive the rows' statistics.
  void run(const void* x, const float* gamma, const float* beta, void* y, float* mean, float* var);
  const std::string& implementations() const { return program_.implementations(); }

 private:
  explicit LayerNormForward(DnnlProgram p) : program_(std::move(p)) {}
  DnnlProgram program_;
};

class LayerNormBackward {
 public:
  static absl::StatusOr<LayerNormBackward> make(CpuContext& ctx, const LayerNormSpec& spec,
                                                absl::string_view where);
  /// dx, and dgamma and dbeta summed over the rows, from the forward's x, mean and var.
  void run(const void* x, const void* dy, const float* mean, const float* var, const float* gamma,
           void* dx, float* dgamma, float* dbeta);
  const std::string& implementations() const { return program_.implementations(); }

 private:
  explicit LayerNormBackward(DnnlProgram p) : program_(std::move(p)) {}
  DnnlProgram program_;
};

}  // namespace tandem::backend::cpu
