#pragma once

// Where the work of a replicated graph runs: on which device each value lives, which of a
// device's two streams runs each node, and how a collective's devices split into groups.
// Facts of the IR that plan-memory, the verifier, the runtime and `tandem dump` all use.

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.h"

namespace tandem::ir {

/// The two queues of work every device has. Collectives run on the comm stream (of each
/// device they span), everything else on the compute stream of its device; a value that
/// crosses from one to the other is ordered by an event.
enum class StreamKind : uint8_t { kCompute, kComm };

inline StreamKind streamOf(const Node& n) {
  return n.info().has(kCollective) ? StreamKind::kComm : StreamKind::kCompute;
}

/// The device a value lives on: its own placement, or for a collective's results the
/// device of its position (results are grouped device-major, `k` per device; concat's
/// one result is on its first device).
Device deviceOfValue(const Value& v);

/// Index of deviceOfValue(v) in Module::devices(), or nullopt when it is not one of them.
std::optional<size_t> deviceIndexOfValue(const Module& m, const Value& v);

/// The number of device groups of a collective: its `groups` attribute where the op has
/// one, else 1.
int64_t numGroups(const Node& n);

/// The groups of a collective as positions in its `devices` list: `groups=G` cuts the
/// list into G consecutive runs of equal length, each reducing (or broadcasting) on its
/// own, as XLA's replica_groups do. One group of every position by default.
std::vector<std::vector<size_t>> collectiveGroups(const Node& n);

/// The group that position `k` of the `devices` list belongs to.
size_t groupOfPosition(const Node& n, size_t k);

}  // namespace tandem::ir
