#pragma once

// Sum and mean over one axis of a dense tensor, seen as [outer, axis, inner] -> [outer,
// inner], on oneDNN's reduction primitive (f32 or bf16, accumulated in f32), or on a loop
// over wide rows (which it streams faster) and where oneDNN refuses the shape (an axis of
// size 1: a copy); and their backward passes, which spread dy over the axis.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/axis_split.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/dnnl_util.h"
#include "ir/types.h"

namespace tandem::backend::cpu {

enum class Reduction : uint8_t { kSum, kMean };

struct ReduceSpec {
  AxisSplit dims;                    // reduced over dims.axis (splitAtAxis)
  ir::DType data = ir::DType::kF32;  // x and y alike
  Reduction kind = Reduction::kSum;
};

class ReduceForward {
 public:
  static absl::StatusOr<ReduceForward> make(CpuContext& ctx, const ReduceSpec& spec,
                                            absl::string_view where);
  /// y[o, i] = sum (or mean) over a of x[o, a, i].
  void run(const void* x, void* y);
  /// oneDNN's implementation, or "loop".
  const std::string& implementations() const;

 private:
  ReduceForward(const ReduceSpec& spec, std::optional<DnnlProgram> p)
      : spec_(spec), program_(std::move(p)) {}
  ReduceSpec spec_;
  std::optional<DnnlProgram> program_;  // none: the loop
};

/// dx[o, a, i] = dy[o, i] (sum) or dy[o, i] * (1 / axis) (mean, the factor rounded to
/// float once). A loop, not oneDNN: a broadcast copy is memory bound and oneDNN has no
/// primitive for it short of a binary op against a zero tensor.
void reduceBackward(const ReduceSpec& spec, const void* dy, void* dx);

}  // namespace tandem::backend::cpu
