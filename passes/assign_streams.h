#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `assign-streams`: starts each graph's execution plan (ir/plan.h) with the stream of
/// its device every node's shares run on: collectives on the comm stream, the rest on the
/// compute stream (ir/placement.h's streamOf), so a bucket's all_reduce overlaps the
/// backward work that follows it. The graph must be in issue order (after `schedule`):
/// the plan is made for it as it is, and any later rewrite makes the plan stale. Needs a
/// replicated module.
class AssignStreams final : public Pass {
 public:
  static constexpr absl::string_view kName = "assign-streams";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
