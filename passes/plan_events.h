#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `plan-events`: the waits between streams, once, for everything that needs them (the
/// executor's events, plan-memory's reuse, the simulator's replay): before a share runs,
/// its stream waits for the latest share of each other stream that wrote a value it reads
/// (the runtime records an event after that share). A wait is left out where an earlier
/// wait of the same stream on the same other stream already reached as far, since a
/// stream is a FIFO: one per bucket and device for the gradients, not one per gradient.
/// Needs assign-streams' plan of the graph as it is.
class PlanEvents final : public Pass {
 public:
  static constexpr absl::string_view kName = "plan-events";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
