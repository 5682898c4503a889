#pragma once

#include "absl/status/status.h"
#include "ir/ir.h"

namespace tandem::ir {

/// Checks the execution plan of `g` (ir/plan.h; OK when it has none) and returns the first
/// fault as "graph @G: plan: ...", naming the nodes, values and byte ranges involved:
///  - it is fresh: made for the graph as it is (its fingerprint), holding its parts in
///    order (events need streams, memory needs events);
///  - streams: every node that runs has one, nodes that run nowhere have no plan;
///  - events: every wait names a value an earlier node writes on a stream other than the
///    waiting share's; and every value a share reads is ordered before it: its writer's
///    share runs earlier on the same stream, or an event chain (the waits, and each
///    stream's FIFO order) leads from it;
///  - memory: every arena value has an offset, aligned, within its device's arena; and no
///    two buffers share bytes unless every access of the earlier is ordered before the
///    write of the later one (else: the two nodes may run at once, or the bytes are
///    released before their last reader runs), nor the bytes of a value the graph
///    returns.
/// Ordering is decided as the executor runs the plan: streams are FIFOs, and a wait orders
/// the writer's share before the waiting one; nothing else (collectives are not assumed to
/// synchronize their devices). Linear in the graph's shares, waits and reads, up to a log
/// factor for the arena map.
absl::Status verifyPlan(const Graph& g);

}  // namespace tandem::ir
