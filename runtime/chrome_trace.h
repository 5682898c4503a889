#pragma once

// Traced steps as a timeline in the Chrome trace event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: per device a process, per stream a thread,
// every node's share a slice, every event one stream waited for an arrow.

#include <string>

#include "absl/types/span.h"
#include "ir/ir.h"
#include "ir/plan.h"
#include "runtime/executor.h"

namespace tandem::runtime {

/// The JSON object {"traceEvents": [...], ...} of `entries` (Executor::takeTrace() of one
/// or more runs of a graph of `m`, in the order the executor issued them):
/// - "M" metadata naming process `d` after device `d` ("cpu:0") and its threads 0 and 1
///   "compute" and "comm", and 2 "prefetch" where the entries have copies of the input
///   pipeline on the device (TraceEntry::prefetch; their slices are named "prefetch: "
///   and the split's work, and no wait arrow ends at them);
/// - per entry an "X" slice (ts and dur in microseconds from the first start) named as
///   `tandem dump --format streams` names the work, with args op, scope, node, bytes (of
///   the results the share writes on its device) and step (0 for the first run traced);
/// - per wait of `waits` (ir::streamWaits of that graph: its plan's) and run, a flow "s" inside the
///   producer's slice and "f" inside the consumer's (both bound to the enclosing slice),
///   sharing an id. A run's k-th share of a node on a stream is matched with the k-th of
///   the others, since the executor issues every run whole; a wait whose shares were not
///   both traced gets no arrow.
std::string chromeTrace(const ir::Module& m, absl::Span<const TraceEntry> entries,
                        absl::Span<const ir::StreamWait> waits);

}  // namespace tandem::runtime
