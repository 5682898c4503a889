#include "passes/feed_learning_rate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::passes {

absl::StatusOr<bool> FeedLearningRate::run(ir::Module& m) {
  if (m.isReplicated())
    return absl::FailedPreconditionError(
        "feed-learning-rate: the module is replicated already; run it before replicate");
  if (m.findVar(kVar) != nullptr) return false;
  ir::Graph* g = m.graph(ir::kTrainGraph);
  if (g == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("feed-learning-rate: module @", m.name(), " has no @", ir::kTrainGraph));
  std::vector<ir::Node*> updates;
  for (const auto& n : g->nodes()) {
    std::optional<ir::UpdateView> u = ir::UpdateView::of(*n);
    if (!u) continue;
    if (!u->info().lr_scale)
      return absl::FailedPreconditionError(
          absl::StrCat("feed-learning-rate: ", n->describe(),
                       " takes no learning-rate factor (its op has no lr_scale operand)"));
    updates.push_back(n.get());
  }
  if (updates.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "feed-learning-rate: @", ir::kTrainGraph, " has no optimizer update (run autodiff first)"));
  const std::string var(kVar);
  RETURN_IF_ERROR(m.addVar({var, ir::TensorType{ir::DType::kF32, {1}}, ir::VarRole::kFed,
                            ir::Initializer{ir::Initializer::Kind::kOnes}}));
  // Initialized like any variable, so a step run without a schedule uses the plain lr.
  if (ir::Graph* init = m.graph(ir::kInitGraph); init != nullptr) {
    ASSIGN_OR_RETURN(ir::Node * value,
                     init->create(ir::InitializeArgs{.var = var}.spec({.names = {var}})));
    RETURN_IF_ERROR(
        init->create(ir::AssignArgs{.value = value->result(), .var = var}.spec()).status());
  }
  // The factor is read once, before the first update; each update appends it.
  ASSIGN_OR_RETURN(ir::Node * read, g->create(ir::ParamArgs{.var = var}.spec({.names = {var}}),
                                              g->positions().at(updates.front())));
  for (ir::Node* u : updates) {
    std::vector<ir::Value*> operands(u->operands().begin(), u->operands().end());
    operands.push_back(read->result());
    RETURN_IF_ERROR(g->create({.op = u->op(),
                                .operands = std::move(operands),
                                .attr_values = u->attrs(),
                                .device = u->device(),
                                .scope = u->scope(),
                                .location = u->location()},
                               g->positions().at(u))
                        .status());
  }
  g->eraseIf([&](const ir::Node& n) {
    return std::find(updates.begin(), updates.end(), &n) != updates.end();
  });
  return true;
}

absl::StatusOr<std::unique_ptr<Pass>> FeedLearningRate::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new FeedLearningRate());
}

}  // namespace tandem::passes
