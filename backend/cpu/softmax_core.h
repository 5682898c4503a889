#pragma once

// softmax and log-softmax over one axis of a dense tensor, forward and backward, on
// oneDNN's softmax and logsoftmax primitives (f32 or bf16; exp and log evaluated in f32
// inside, the row's maximum subtracted first). The tensor is seen as [outer, axis, inner]
// (the dimensions before the axis, the axis, the ones after), so any axis of any rank is
// one primitive; the last axis (inner = 1, attention's rows) is the fast case. An f32
// softmax over rows of at most 64 (attention's) runs softmax_vectors.h's registers
// instead, on AVX-512 hosts.
//
// Backward reads the forward's output y: dx = y (dy - sum(dy y)) for softmax,
// dx = dy - exp(y) sum(dy) for log-softmax.
//
// NaN and infinities as PyTorch has them: a row holding a NaN or +inf, or only -inf, is
// NaN throughout, and log-softmax's backward is NaN where y is. oneDNN's primitives get
// these wrong (softmax_rows.h), so run() scans for such rows first and rewrites them after
// the primitive; a tensor of finite values costs one more vectorized read.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/axis_split.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/softmax_rows.h"
#include "ir/types.h"

namespace tandem::backend::cpu {

struct SoftmaxSpec {
  AxisSplit dims;  // normalized over dims.axis (splitAtAxis)
  ir::DType data = ir::DType::kF32;
  bool log = false;  // log-softmax
};

class SoftmaxForward {
 public:
  static absl::StatusOr<SoftmaxForward> make(CpuContext& ctx, const SoftmaxSpec& spec,
                                             absl::string_view where);
  /// y may be x.
  void run(const void* x, void* y);
  const std::string& implementations() const { return program_.implementations(); }

 private:
  SoftmaxForward(DnnlProgram p, const SoftmaxSpec& spec) : program_(std::move(p)), spec_(spec) {}
  DnnlProgram program_;
  SoftmaxSpec spec_;
  std::vector<uint8_t> flags_;     // findNanRows' scratch
  std::vector<int64_t> nan_rows_;  // this run's rows that PyTorch makes NaN
};

class SoftmaxBackward {
 public:
  static absl::StatusOr<SoftmaxBackward> make(CpuContext& ctx, const SoftmaxSpec& spec,
                                              absl::string_view where);
  /// dx from the forward's output y and dy; dx may be dy.
  void run(const void* y, const void* dy, void* dx);
  const std::string& implementations() const { return program_.implementations(); }

 private:
  SoftmaxBackward(DnnlProgram p, const SoftmaxSpec& spec) : program_(std::move(p)), spec_(spec) {}
  DnnlProgram program_;
  SoftmaxSpec spec_;
  std::vector<uint8_t> flags_;    // findLogSoftmaxGradRows' scratch
  LogSoftmaxGradRows grad_rows_;  // log-softmax: this run's rows with a NaN y
};

}  // namespace tandem::backend::cpu
