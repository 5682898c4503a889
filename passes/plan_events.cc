#include "passes/plan_events.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "ir/plan.h"
#include "ir/status_macros.h"

namespace tandem::passes {
namespace {

// Dense number of a stream: two per device.
size_t slotIndex(const ir::StreamSlot& s) {
  return s.device * 2 + (s.stream == ir::StreamKind::kComm ? 1 : 0);
}

void planWaits(const ir::Module& m, const ir::Graph& g, ir::GraphPlan& plan) {
  std::vector<size_t> position(g.idBound(), 0);
  for (size_t i = 0; i < g.numNodes(); ++i) position[g.nodes()[i]->id()] = i;
  // The last position of each stream that another stream already waits for, keyed by the
  // pair of streams: waiting for a later node of a FIFO covers every earlier one.
  const size_t streams = m.devices().size() * 2;
  absl::flat_hash_map<size_t, size_t> waited_up_to;
  struct Latest {
    size_t pos;
    const ir::Value* value;
  };
  absl::flat_hash_map<size_t, Latest> latest;  // of the share at hand, by writer stream
  struct Found {
    size_t pos, from;
    const ir::Value* value;
  };
  std::vector<Found> found;
  for (const auto& node : g.nodes()) {
    const ir::Node& n = *node;
    ir::NodePlan& p = plan.of(n);
    if (!p.stream) continue;  // runs nowhere
    const std::vector<size_t> shares = ir::sharesOf(m, n);
    for (size_t k = 0; k < shares.size(); ++k) {
      const size_t at = slotIndex({shares[k], *p.stream});
      latest.clear();
      for (const ir::Value* v : ir::readsOf(m, n, k)) {
        const std::optional<ir::StreamKind>& by = plan.of(*v->def()).stream;
        if (!by) continue;  // host data, variable storage
        const size_t from = slotIndex({*ir::deviceIndexOfValue(m, *v), *by});
        if (from == at) continue;
        auto [it, inserted] = latest.try_emplace(from, Latest{position[v->def()->id()], v});
        if (!inserted && position[v->def()->id()] > it->second.pos)
          it->second = {position[v->def()->id()], v};
      }
      found.clear();
      for (const auto& [from, l] : latest) {
        auto [done, inserted] = waited_up_to.try_emplace(at * streams + from, l.pos);
        if (!inserted) {
          if (done->second >= l.pos) continue;
          done->second = l.pos;
        }
        found.push_back({l.pos, from, l.value});
      }
      // In issue order of the writers (the map's order is its hash's).
      std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
        return std::tie(a.pos, a.from) < std::tie(b.pos, b.from);
      });
      for (const Found& f : found)
        p.waits.push_back({f.value->def()->id(), static_cast<uint32_t>(f.value->index())});
    }
  }
}

}  // namespace

absl::StatusOr<bool> PlanEvents::run(ir::Module& m) {
  for (const auto& g : m.graphs()) {
    RETURN_IF_ERROR(ir::checkPlanFor(*g, ir::PlanPart::kStreams, "assign-streams"));
    ir::GraphPlan& plan = *g->mutablePlan();
    for (ir::NodePlan& p : plan.nodes) p.waits.clear();
    planWaits(m, *g, plan);
    plan.add(ir::PlanPart::kEvents);
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Pass>> PlanEvents::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new PlanEvents());
}

}  // namespace tandem::passes
