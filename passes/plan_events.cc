#include "passes/plan_events.h"

#include <algorithm>
#include <tuple>

#include "absl/container/inlined_vector.h"
#include "ir/plan.h"
#include "ir/status_macros.h"

namespace tandem::passes {
namespace {

constexpr uint32_t kNone = ~uint32_t{0};

// Dense number of a stream: two per device.
uint32_t slotIndex(size_t device, ir::StreamKind stream) {
  return static_cast<uint32_t>(device * 2 + (stream == ir::StreamKind::kComm ? 1 : 0));
}

// The waits of one graph, in one sweep. Linear in the graph's reads; the containers are
// flat and reused, since this runs over every node of every device (a 4096-device module
// has millions of shares).
class WaitPlanner {
 public:
  WaitPlanner(const ir::Module& m, const ir::Graph& g, ir::GraphPlan& plan)
      : m_(m), g_(g), plan_(plan), device_index_(m), waited_(m.devices().size() * 2) {
    position_.assign(g.idBound(), 0);
    slot_.assign(g.idBound(), kNone);
    collective_.assign(g.idBound(), false);
  }

  // One sweep: each node's own entries are filled as it is reached, since what it reads was
  // written by earlier nodes (each visit of a node is a walk through the graph's pointers,
  // the most of what this pass costs).
  void run() {
    for (size_t i = 0; i < g_.numNodes(); ++i) {
      const ir::Node& n = *g_.nodes()[i];
      ir::NodePlan& p = plan_.of(n);
      position_[n.id()] = static_cast<uint32_t>(i);
      if (!p.stream) continue;  // runs nowhere
      // A collective's results lie on the devices of its list.
      collective_[n.id()] = !n.device();
      if (n.device()) slot_[n.id()] = slotIndex(*device_index_(*n.device()), *p.stream);
      if (!n.info().has(ir::kCollective)) {
        // One share, on its device, reading every operand: no lists to build.
        share(p, slot_[n.id()], n.operands());
        continue;
      }
      const std::vector<size_t> shares = ir::sharesOf(m_, n);
      for (size_t k = 0; k < shares.size(); ++k)
        share(p, slotIndex(shares[k], *p.stream), ir::readsOf(m_, n, k));
    }
  }

 private:
  // The stream that wrote `v`, or kNone for host data and variable storage.
  uint32_t writerSlot(const ir::Value& v) const {
    const uint32_t id = v.def()->id();
    if (!collective_[id]) return slot_[id];
    return slotIndex(*ir::deviceIndexOfValue(m_, v), *plan_.of(*v.def()).stream);
  }

  // The waits of one share on stream `at` that reads `reads`: per other stream, its
  // latest writer, unless an earlier wait of `at` on that stream reached as far.
  template <typename Values>
  void share(ir::NodePlan& p, uint32_t at, const Values& reads) {
    latest_.clear();
    for (const ir::Value* v : reads) {
      const uint32_t from = writerSlot(*v);
      if (from == kNone || from == at) continue;
      const uint32_t pos = position_[v->def()->id()];
      auto it = std::find_if(latest_.begin(), latest_.end(),
                             [&](const Latest& l) { return l.from == from; });
      if (it == latest_.end()) {
        latest_.push_back({from, pos, v});
      } else if (pos > it->pos) {
        *it = {from, pos, v};
      }
    }
    if (latest_.empty()) return;
    // In issue order of the writers, then by stream.
    std::sort(latest_.begin(), latest_.end(), [](const Latest& a, const Latest& b) {
      return std::tie(a.pos, a.from) < std::tie(b.pos, b.from);
    });
    auto& waited = waited_[at];
    for (const Latest& l : latest_) {
      auto it = std::find_if(waited.begin(), waited.end(),
                             [&](const auto& w) { return w.first == l.from; });
      if (it == waited.end()) {
        waited.push_back({l.from, l.pos});
      } else if (it->second >= l.pos) {
        continue;  // the FIFO of `from` covers it
      } else {
        it->second = l.pos;
      }
      p.waits.push_back({l.value->def()->id(), static_cast<uint32_t>(l.value->index())});
    }
  }

  struct Latest {
    uint32_t from, pos;
    const ir::Value* value;
  };
  const ir::Module& m_;
  const ir::Graph& g_;
  ir::GraphPlan& plan_;
  ir::DeviceIndexCache device_index_;
  std::vector<uint32_t> position_;  // by node id
  // By node id: the stream a placed node runs on (kNone where it runs nowhere), and
  // whether it is a collective, whose results lie on the devices of its list.
  std::vector<uint32_t> slot_;
  std::vector<bool> collective_;
  // By waiting stream: how far it waited on each other stream (the device's other stream,
  // and for a gather the streams of the devices it gathers from).
  std::vector<absl::InlinedVector<std::pair<uint32_t, uint32_t>, 1>> waited_;
  absl::InlinedVector<Latest, 4> latest_;
};

}  // namespace

absl::StatusOr<bool> PlanEvents::run(ir::Module& m) {
  for (const auto& g : m.graphs()) {
    RETURN_IF_ERROR(ir::requirePlanPart(*g, ir::PlanPart::kStreams, "assign-streams"));
    ir::GraphPlan& plan = *g->mutablePlan();
    for (ir::NodePlan& p : plan.nodes) p.waits.clear();
    WaitPlanner(m, *g, plan).run();
    plan.add(ir::PlanPart::kEvents);
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Pass>> PlanEvents::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new PlanEvents());
}

}  // namespace tandem::passes
