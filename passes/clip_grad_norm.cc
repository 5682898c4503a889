#include "passes/clip_grad_norm.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/number_format.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"

namespace tandem::passes {

absl::StatusOr<bool> ClipGradNorm::run(ir::Module& m) {
  ir::Graph* g = m.graph(ir::kTrainGraph);
  if (g == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("clip-grad-norm: module @", m.name(), " has no @", ir::kTrainGraph));
  // Each device's updates, in graph order (a module not replicated: one "device").
  std::map<std::string, std::vector<ir::Node*>> updates;
  std::vector<std::string> device_order;
  for (const auto& n : g->nodes()) {
    if (n->op() == ir::Op::kClipGradNorm)
      return absl::FailedPreconditionError(
          absl::StrCat("clip-grad-norm: @", ir::kTrainGraph, " clips already (", n->describe(), ")"));
    std::optional<ir::UpdateView> u = ir::UpdateView::of(*n);
    if (!u) continue;
    if (u->grouped())
      return absl::FailedPreconditionError(absl::StrCat(
          "clip-grad-norm: ", n->describe(), " is grouped; run clip-grad-norm before group-updates"));
    const std::string device = n->device() ? ir::toString(*n->device()) : std::string();
    auto [it, inserted] = updates.try_emplace(device);
    if (inserted) device_order.push_back(device);
    it->second.push_back(n.get());
  }
  if (updates.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "clip-grad-norm: @", ir::kTrainGraph, " has no optimizer update (run autodiff first)"));
  // Positions in the graph as it was: the clips are spliced in by one rebuild at the end
  // (a positions() per device would be quadratic at a thousand devices).
  const ir::Graph::Positions pos = g->positions();
  Insertions insert(*g);
  for (const std::string& device : device_order) {
    const std::vector<ir::Node*>& mine = updates.at(device);
    // One clip before the device's first update, after every gradient it reads.
    const size_t first = pos.at(mine.front());
    std::vector<ir::Value*> grads;
    std::vector<std::string> names;
    for (ir::Node* n : mine) {
      ir::Value* grad = ir::UpdateView::of(*n)->grad(0);
      if (pos.at(grad->def()) > first)
        return absl::FailedPreconditionError(absl::StrCat(
            "clip-grad-norm: ", mine.front()->describe(), " comes before %", grad->name(),
            ", which another update reads; run clip-grad-norm right after insert-collectives"));
      grads.push_back(grad);
      names.push_back(absl::StrCat(grad->name(), ".clipped"));
    }
    // `first` > 0: the gradients come before it.
    ASSIGN_OR_RETURN(ir::Node * clip,
                     insert.add(first - 1, ir::ClipGradNormArgs{.gs = grads, .max_norm = max_norm_}
                                               .spec({.device = mine.front()->device(),
                                                      .names = std::move(names)})));
    for (size_t j = 0; j < mine.size(); ++j)
      mine[j]->setOperand(ir::UpdateView::of(*mine[j])->gradOperand(0), clip->result(j));
  }
  insert.apply();
  return true;
}

std::string ClipGradNorm::optionsText() const {
  return absl::StrCat("{max-norm=", ir::formatDouble(max_norm_), "}");
}

absl::StatusOr<std::unique_ptr<Pass>> ClipGradNorm::create(PassOptions& opts) {
  if (!opts.has("max-norm"))
    return absl::InvalidArgumentError("pass clip-grad-norm: option 'max-norm' is required");
  ASSIGN_OR_RETURN(double max_norm, opts.getDouble("max-norm", 0));
  RETURN_IF_ERROR(opts.finish());
  if (!(max_norm > 0) || !std::isfinite(max_norm))
    return absl::InvalidArgumentError(absl::StrCat(
        "pass clip-grad-norm: option 'max-norm' must be a finite number > 0, got ",
        ir::formatDouble(max_norm)));
  return std::unique_ptr<Pass>(new ClipGradNorm(max_norm));
}

}  // namespace tandem::passes
