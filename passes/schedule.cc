#include "passes/schedule.h"

#include <cstdint>
#include <vector>

#include "ir/placement.h"
#include "ir/status_macros.h"

namespace tandem::passes {
namespace {

// A node "waits for a reduction" when one of its operands comes, directly or through
// other nodes, from a gradient all_reduce. Collectives themselves stay in the first part
// (they are ordered by readiness already); only compute work behind them sinks.
bool scheduleGraph(ir::Graph& g) {
  std::vector<uint8_t> after_reduce(g.idBound(), 0);
  bool seen_tail = false, changed = false;
  for (const auto& n : g.nodes()) {
    bool waits = false;
    for (const ir::Value* v : n->operands()) {
      const ir::Node& def = *v->def();
      if (after_reduce[def.id()] || def.op() == ir::Op::kAllReduce) waits = true;
    }
    if (waits && ir::streamOf(*n) == ir::StreamKind::kCompute) {
      after_reduce[n->id()] = 1;
      seen_tail = true;
    } else if (seen_tail) {
      changed = true;  // a node that does not wait comes after one that does
    }
  }
  if (!changed) return false;
  std::vector<std::unique_ptr<ir::Node>> nodes = g.takeNodes();
  std::vector<std::unique_ptr<ir::Node>> order, tail;
  order.reserve(nodes.size());
  for (auto& n : nodes) (after_reduce[n->id()] ? tail : order).push_back(std::move(n));
  for (auto& n : tail) order.push_back(std::move(n));
  g.setNodes(std::move(order));
  return true;
}

}  // namespace

absl::StatusOr<bool> Schedule::run(ir::Module& m) {
  bool changed = false;
  for (const auto& g : m.graphs()) changed |= scheduleGraph(*g);
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> Schedule::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new Schedule());
}

}  // namespace tandem::passes
