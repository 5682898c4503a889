#include "passes/dce.h"

#include "absl/container/flat_hash_set.h"

namespace tandem::passes {

namespace {

bool hasSideEffects(const ir::Node& n) {
  const ir::OpRules& rules = *n.info().rules;
  return n.op() == ir::Op::kInput || (rules.writes != nullptr && !rules.writes(n).empty());
}

}  // namespace

absl::StatusOr<bool> DeadCodeElimination::run(ir::Module& m) {
  bool changed = false;
  for (const auto& g : m.graphs()) {
    // One backward sweep: a node is live if it has effects or a live user.
    absl::flat_hash_set<const ir::Value*> live(g->outputs().begin(), g->outputs().end());
    absl::flat_hash_set<const ir::Node*> keep;
    live.reserve(g->numNodes() * 2);
    keep.reserve(g->numNodes());
    for (size_t i = g->numNodes(); i-- > 0;) {
      const ir::Node& n = *g->nodes()[i];
      bool needed = hasSideEffects(n);
      for (size_t r = 0; r < n.numResults() && !needed; ++r) needed = live.contains(n.result(r));
      if (!needed) continue;
      keep.insert(&n);
      live.insert(n.operands().begin(), n.operands().end());
    }
    if (keep.size() == g->numNodes()) continue;
    changed = true;
    g->eraseIf([&](const ir::Node& n) { return !keep.contains(&n); });
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> DeadCodeElimination::create(PassOptions& opts) {
  if (absl::Status s = opts.finish(); !s.ok()) return s;
  return std::unique_ptr<Pass>(new DeadCodeElimination());
}

}  // namespace tandem::passes
