#pragma once

// Where the work of a replicated graph runs: on which device each value lives, which of a
// device's two streams runs each node, and how a collective's devices split into groups.
// Facts of the IR that plan-memory, the verifier, the runtime and `tandem dump` all use.

#include <array>
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

/// Module::deviceIndex behind a small direct-mapped cache: the sweeps that ask it for every
/// node of a replicated graph (whose placements cycle through the devices) then skip the
/// hash lookup.
class DeviceIndexCache {
 public:
  explicit DeviceIndexCache(const Module& m) : m_(m) {}
  std::optional<size_t> operator()(const Device& d) {
    Entry& e = entries_[(static_cast<size_t>(d.index) + 31 * static_cast<size_t>(d.rank) +
                         7 * static_cast<size_t>(d.share)) %
                        kEntries];
    if (!e.filled || !(e.device == d)) e = {d, m_.deviceIndex(d), true};
    return e.index;
  }

 private:
  static constexpr size_t kEntries = 64;
  struct Entry {
    Device device;
    std::optional<size_t> index;
    bool filled = false;
  };
  const Module& m_;
  std::array<Entry, kEntries> entries_{};
};

/// The number of device groups of a collective: its `groups` attribute where the op has
/// one, else 1.
int64_t numGroups(const Node& n);

/// One device's queue of one kind: where a share of a node runs.
struct StreamSlot {
  size_t device = 0;  // index into Module::devices()
  StreamKind stream = StreamKind::kCompute;
  bool operator==(const StreamSlot&) const = default;
};

/// The devices (indices into Module::devices()) that run a share of `n`: its own device,
/// or each device of a collective in its `devices` order (concat lists its destination
/// only).
/// Graph inputs and `param` run nowhere (host data, variable storage).
std::vector<size_t> sharesOf(const Module& m, const Node& n);

/// The values share `k` of `n` (k indexes sharesOf(m, n)) reads: every operand for compute
/// work; the device's operands for all_reduce; every slice for concat (one share, on the
/// destination); its group's sources for broadcast (on the sources' own device only);
/// nothing for split, whose input is the host's batch.
std::vector<const Value*> readsOf(const Module& m, const Node& n, size_t k);

/// The groups of a collective as positions in its `devices` list: `groups=G` cuts the
/// list into G consecutive runs of equal length, each reducing (or broadcasting) on its
/// own, as XLA's replica_groups do. One group of every position by default.
std::vector<std::vector<size_t>> collectiveGroups(const Node& n);

/// The group that position `k` of the `devices` list belongs to.
size_t groupOfPosition(const Node& n, size_t k);

}  // namespace tandem::ir
