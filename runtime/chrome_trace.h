#pragma once

// Traced steps as a timeline in the Chrome trace event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: per device a process, per stream a thread,
// every node's share a slice, every event one stream waited for an arrow.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

/// One slice of a trace read back (readChromeTrace): a traced share of a node.
struct TraceSpan {
  const ir::Node* node = nullptr;
  size_t device = 0;  // index into Module::devices() (the trace's process)
  int stream = 0;     // the trace's thread: 0 compute, 1 comm, 2 prefetch
  int64_t step = 0;   // the run of the node on that stream, 0 for the first traced
  double start_us = 0, dur_us = 0;
};

/// The slices of a trace chromeTrace wrote of graph `g` of `m` (what `train --trace`
/// writes of @train_step), checked to be a trace of them: the same devices, in number and
/// by name, and every slice's node a node of `g` on the slice's device (matched by
/// Node::describe() less the source location, so a model whose lines moved still
/// matches) writing the bytes it writes there (another batch does not). Flow arrows and
/// metadata are left out. The error is one line saying what
/// differs ("a trace of 2 devices (...), the module runs on 4 (...)", "its slice of %x
/// (...) is no node of @train_step of lenet") or what is malformed; the caller adds the
/// file's name.
absl::StatusOr<std::vector<TraceSpan>> readChromeTrace(const ir::Module& m, const ir::Graph& g,
                                                       absl::string_view json_text);

}  // namespace tandem::runtime
