#pragma once

// softmax and log-softmax over one axis of a dense tensor, forward and backward, on
// oneDNN's softmax and logsoftmax primitives (f32 or bf16; exp and log evaluated in f32
// inside, the row's maximum subtracted first). The tensor is seen as [outer, axis, inner]
// (the dimensions before the axis, the axis, the ones after), so any axis of any rank is
// one primitive; the last axis (inner = 1, attention's rows) is the fast case.
//
// Backward reads the forward's output y: dx = y (dy - sum(dy y)) for softmax,
// dx = dy - exp(y) sum(dy) for log-softmax.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/axis_split.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/dnnl_util.h"
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
  explicit SoftmaxForward(DnnlProgram p) : program_(std::move(p)) {}
  DnnlProgram program_;
};

class SoftmaxBackward {
 public:
  static absl::StatusOr<SoftmaxBackward> make(CpuContext& ctx, const SoftmaxSpec& spec,
                                              absl::string_view where);
  /// dx from the forward's output y and dy; dx may be dy.
  void run(const void* y, const void* dy, void* dx);
  const std::string& implementations() const { return program_.implementations(); }

 private:
  explicit SoftmaxBackward(DnnlProgram p) : program_(std::move(p)) {}
  DnnlProgram program_;
};

}  // namespace tandem::backend::cpu
