#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `recompute-bn-relu`: the fused forward keeps, per conv -> batch_norm -> relu, both the
/// convolution's output (batch norm's backward needs it) and relu's output (the next
/// convolution's filter gradient and this layer's relu mask need it). The second is one
/// cheap pass over the first, so backward computes it again (batch_norm_recompute, bit for
/// bit) right before its first backward reader, and the forward output dies as soon as the
/// next convolution has read it: one activation fewer per such layer held from forward to
/// backward, for one extra elementwise pass each.
///
/// Only batch_norm_apply with relu and without a residual: a residual join's output is
/// the next block's input, itself the output of another join, so recomputing it would
/// need the chain before it. Runs after insert-collectives (so that, with sync batch norm,
/// the recompute reads the all-reduced statistics as the forward does) and before dce.
class RecomputeBnRelu final : public Pass {
 public:
  static constexpr absl::string_view kName = "recompute-bn-relu";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
