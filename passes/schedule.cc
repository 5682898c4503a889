#include "passes/schedule.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/interfaces.h"
#include "ir/placement.h"
#include "ir/status_macros.h"

namespace tandem::passes {
namespace {

// A collective whose results hold other devices' values (a reduction, its shard, or
// gathered shards): what reads them waits for every device of the group.
bool waitsForOtherDevices(const ir::Node& n) {
  const std::optional<ir::CollectiveKind> k = ir::collectiveKind(n);
  return k == ir::CollectiveKind::kReduce || k == ir::CollectiveKind::kReduceScatter ||
         k == ir::CollectiveKind::kAllGather;
}

// A node "waits for a reduction" when one of its operands comes, directly or through
// other nodes, from such a collective (an all_reduce above all). Collectives themselves stay in the
// first part (they are ordered by readiness already), and so does everything a collective needs,
// directly or through other nodes (sync batch norm's forward reads reduced statistics and feeds the
// next layer's reduction): only compute work that no collective waits for sinks, the
// optimizer updates above all.
bool scheduleGraph(ir::Graph& g) {
  std::vector<uint8_t> feeds_collective(g.idBound(), 0);
  for (size_t i = g.numNodes(); i-- > 0;) {
    const ir::Node& n = *g.nodes()[i];
    if (!feeds_collective[n.id()] && ir::streamOf(n) != ir::StreamKind::kComm) continue;
    for (const ir::Value* v : n.operands()) feeds_collective[v->def()->id()] = 1;
  }
  std::vector<uint8_t> after_reduce(g.idBound(), 0);
  bool seen_tail = false, changed = false;
  for (const auto& n : g.nodes()) {
    bool waits = false;
    for (const ir::Value* v : n->operands()) {
      const ir::Node& def = *v->def();
      if (after_reduce[def.id()] || waitsForOtherDevices(def)) waits = true;
    }
    if (waits && ir::streamOf(*n) == ir::StreamKind::kCompute && !feeds_collective[n->id()]) {
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
