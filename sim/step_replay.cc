#include "sim/step_replay.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "ir/placement.h"
#include "ir/plan.h"

namespace tandem::sim {

std::vector<SimOp> deviceSchedule(const ir::Module& m, const ir::Graph& g, size_t device,
                                  const NodeCost& cost) {
  std::vector<SimOp> ops;
  absl::flat_hash_map<const ir::Node*, size_t> index;
  for (const auto& n : g.nodes()) {
    std::vector<size_t> shares = ir::sharesOf(m, *n);
    if (std::find(shares.begin(), shares.end(), device) == shares.end()) continue;
    index[n.get()] = ops.size();
    ops.push_back({.name = ir::describeWork(*n),
                   .comm = g.plan()->of(*n).stream == ir::StreamKind::kComm,
                   .seconds = cost(*n)});
  }
  for (const ir::StreamWait& w : ir::streamWaits(m, g)) {
    if (w.at.device != device) continue;
    auto consumer = index.find(w.consumer);
    auto producer = index.find(w.producer);
    if (consumer == index.end() || producer == index.end()) continue;
    // A same-stream "wait" (another device's share of this stream) is already the FIFO.
    if (ops[consumer->second].comm == ops[producer->second].comm) continue;
    ops[consumer->second].waits.push_back(producer->second);
  }
  return ops;
}

}  // namespace tandem::sim
