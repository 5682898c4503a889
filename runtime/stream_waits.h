#pragma once

// The events a replicated graph needs between streams: what the executor records and
// waits for, derived once from the graph's issue order, and what `tandem dump --format
// streams` prints.

#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/placement.h"

namespace tandem::runtime {

/// One device's queue of one kind: where a share of a node runs.
struct StreamSlot {
  size_t device = 0;  // index into Module::devices()
  ir::StreamKind stream = ir::StreamKind::kCompute;
  bool operator==(const StreamSlot&) const = default;
};

/// The devices (indices into Module::devices()) that run a share of `n`: its own device,
/// or each device of a collective in its `devices` order. Graph inputs and `param` run
/// nowhere (host data, variable storage).
std::vector<size_t> sharesOf(const ir::Module& m, const ir::Node& n);

/// The values share `k` of `n` reads: every operand for compute work; the device's
/// operands for all_reduce; every slice for concat (one share, on the destination); its
/// group's sources for broadcast (on the sources' own device only); nothing for split,
/// whose input is the host's batch.
std::vector<const ir::Value*> readsOf(const ir::Module& m, const ir::Node& n, size_t k);

/// A dependency between streams, which the runtime turns into an event: before the share
/// of `consumer` on `at` runs, the share of `producer` on `from` must be done.
struct StreamWait {
  const ir::Node* consumer;
  StreamSlot at;
  const ir::Node* producer;
  StreamSlot from;
};

/// Every cross-stream wait of a graph in issue order (one per consumer share and producer
/// share, however many values pass between them; none where an earlier wait on the same
/// pair of streams already covers it, since a stream is a FIFO).
std::vector<StreamWait> streamWaits(const ir::Module& m, const ir::Graph& g);

/// How a stream listing names a node's work: compute work by its first result (or what it
/// updates), collectives by what they move ("all_reduce bucket 2", "split %x").
std::string describeWork(const ir::Node& n);

/// "cpu:0/comm".
std::string slotName(const ir::Module& m, const StreamSlot& s);

/// The graph as the streams see it: per device and stream, the issue order with the waits
/// before each node (`tandem dump --format streams`).
std::string printStreams(const ir::Module& m, const ir::Graph& g);

}  // namespace tandem::runtime
