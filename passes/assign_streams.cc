#include "passes/assign_streams.h"

#include "absl/strings/str_cat.h"
#include "ir/plan.h"
#include "ir/status_macros.h"

namespace tandem::passes {

absl::StatusOr<bool> AssignStreams::run(ir::Module& m) {
  if (!m.isReplicated())
    return absl::FailedPreconditionError(
        absl::StrCat("assign-streams: module @", m.name(),
                     " has no devices: streams belong to devices (run replicate first)"));
  for (const auto& g : m.graphs()) {
    auto plan = std::make_shared<ir::GraphPlan>();
    plan->add(ir::PlanPart::kStreams);
    plan->nodes.resize(g->idBound());
    // The streams in the fingerprint's sweep: one visit of each node.
    plan->fingerprint = ir::graphFingerprint(*g, [&](const ir::Node& n) {
      if (!ir::isSource(n.op())) plan->of(n).stream = ir::streamOf(n);
    });
    g->setPlan(std::move(plan));
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Pass>> AssignStreams::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new AssignStreams());
}

}  // namespace tandem::passes
