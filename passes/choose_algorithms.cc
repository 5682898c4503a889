#include "passes/choose_algorithms.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/plan.h"
#include "ir/status_macros.h"
#include "ir/target.h"

namespace tandem::passes {
namespace {

/// The algorithm rules of `n`'s target, or null: collectives and host data run nowhere a
/// target chooses for, and a kind without rules has no choice to plan.
const ir::AlgorithmRules* rulesOf(const ir::Node& n) {
  if (!n.device()) return nullptr;
  const ir::TargetInfo* t = ir::findTarget(n.device()->kind);
  return t != nullptr && t->algorithm_rules.choose ? &t->algorithm_rules : nullptr;
}

}  // namespace

absl::StatusOr<bool> ChooseAlgorithms::run(ir::Module& m) {
  if (!m.isReplicated())
    return absl::FailedPreconditionError(
        absl::StrCat("choose-algorithms: module @", m.name(),
                     " has no devices: algorithms belong to devices (run replicate first)"));
  for (const auto& g : m.graphs()) {
    RETURN_IF_ERROR(ir::requirePlanPart(*g, ir::PlanPart::kStreams, "assign-streams"));
    ir::GraphPlan& plan = *g->mutablePlan();
    const ir::AlgorithmRules::LayoutOf layout = [&](const ir::Value& v) { return plan.layout(v); };
    plan.add(ir::PlanPart::kAlgorithms);
    for (const auto& n : g->nodes()) {
      const ir::AlgorithmRules* rules = rulesOf(*n);
      plan.of(*n).algorithm = rules != nullptr ? rules->choose(*n, layout, exact_) : "";
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Pass>> ChooseAlgorithms::create(PassOptions& opts) {
  ASSIGN_OR_RETURN(std::string conv, opts.getString("conv", "auto"));
  if (conv != "auto" && conv != "direct")
    return absl::InvalidArgumentError(absl::StrCat(
        "pass choose-algorithms: option 'conv' must be auto or direct, got '", conv, "'"));
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new ChooseAlgorithms(conv == "direct"));
}

}  // namespace tandem::passes
