#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace tandem::passes {

/// The two queues of work every device has. Collectives run on the comm stream (of each
/// device they span), everything else on the compute stream of its device; a value that
/// crosses from one to the other is ordered by an event.
enum class StreamKind : uint8_t { kCompute, kComm };

inline StreamKind streamOf(const ir::Node& n) {
  return n.info().has(ir::kCollective) ? StreamKind::kComm : StreamKind::kCompute;
}

/// The device a value lives on: its own placement, or for a collective's results the
/// device of its group (results are grouped device-major, `k` per device).
ir::Device deviceOfValue(const ir::Value& v);

/// Index of deviceOfValue(v) in Module::devices(), or nullopt when it is not one of them.
std::optional<size_t> deviceIndexOfValue(const ir::Module& m, const ir::Value& v);

/// One device's queue of one kind: where a share of a node runs.
struct StreamSlot {
  size_t device = 0;  // index into Module::devices()
  StreamKind stream = StreamKind::kCompute;
  bool operator==(const StreamSlot&) const = default;
};

/// The devices (indices into Module::devices()) that run a share of `n`: its own device,
/// or each device of a collective in its `devices` order. Graph inputs and `param` run
/// nowhere (host data, variable storage).
std::vector<size_t> sharesOf(const ir::Module& m, const ir::Node& n);

/// The values share `k` of `n` reads: every operand for compute work; the device's group
/// for all_reduce; the slice for concat; the source for broadcast (on its own device
/// only); nothing for split, whose input is the host's batch.
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
/// share, however many values pass between them). Work on one stream needs none: its
/// FIFO orders it.
std::vector<StreamWait> streamWaits(const ir::Module& m, const ir::Graph& g);

/// The graph as the streams see it: per device and stream, the issue order with the waits
/// before each node (`tandem dump --format streams`).
std::string printStreams(const ir::Module& m, const ir::Graph& g);

}  // namespace tandem::passes
