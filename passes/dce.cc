#include "passes/dce.h"

#include <cstdint>
#include <vector>

#include "ir/status_macros.h"

namespace tandem::passes {

namespace {

bool hasSideEffects(const ir::Node& n) {
  const ir::OpRules& rules = *n.info().rules;
  return n.op() == ir::Op::kInput || (rules.writes != nullptr && !rules.writes(n).empty());
}

}  // namespace

absl::StatusOr<bool> DeadCodeElimination::run(ir::Module& m) {
  bool changed = false;
  std::vector<uint8_t> needed;  // by node id: some result is used by a kept node or returned
  for (const auto& g : m.graphs()) {
    needed.assign(g->idBound(), 0);
    for (const ir::Value* v : g->outputs())
      if (v->def()->id() < needed.size()) needed[v->def()->id()] = 1;
    // One backward sweep: a node stays if it has effects or a kept user.
    size_t kept = 0;
    for (size_t i = g->numNodes(); i-- > 0;) {
      const ir::Node& n = *g->nodes()[i];
      if (!needed[n.id()] && !hasSideEffects(n)) continue;
      needed[n.id()] = 1;
      ++kept;
      for (const ir::Value* v : n.operands())
        if (v->def()->id() < needed.size()) needed[v->def()->id()] = 1;
    }
    if (kept == g->numNodes()) continue;
    changed = true;
    g->eraseIf([&](const ir::Node& n) { return !needed[n.id()]; });
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> DeadCodeElimination::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new DeadCodeElimination());
}

}  // namespace tandem::passes
