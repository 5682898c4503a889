#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace tandem::ir {

/// Where each value of a graph lives at run time, as `plan-memory` decided: an offset in
/// its device's arena (one allocation per device and graph, reused every step), or
/// nowhere when the value is not arena memory (graph inputs come from the host, `param`
/// results are views of variable storage).
struct MemoryPlan {
  static constexpr int64_t kNoOffset = -1;
  /// Bytes of each device's arena, indexed like Module::devices().
  std::vector<int64_t> arena_bytes;
  /// The most bytes live at once on each device (a lower bound for any placement; the
  /// arena exceeds it only by fragmentation).
  std::vector<int64_t> live_peak_bytes;
  /// Bytes all arena values would take without reuse, per device.
  std::vector<int64_t> unshared_bytes;
  /// offsets[node id][result index].
  std::vector<absl::InlinedVector<int64_t, 2>> offsets;
  /// The graph's node count when planned: a later rewrite makes the plan stale.
  size_t planned_nodes = 0;
  /// Every offset (and arena size) is a multiple of this; the executor checks it against
  /// what each device's backend needs.
  int64_t alignment = 64;
};

}  // namespace tandem::ir
