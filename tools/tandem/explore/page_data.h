#pragma once

// What `tandem explore` puts into its page: one graph of a module with its execution plan,
// the memory plan's buffers, the cost model's estimates and, when given, a training run's
// trace and learning curves, as one JSON document that explore.js reads (the format is
// this file's and explore.js's alone; `format` says which).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/chrome_trace.h"
#include "tools/tandem/plot.h"

namespace tandem::tools::explore {

/// The version of the document's layout, which explore.js checks.
inline constexpr int kPageDataFormat = 1;

struct PageInputs {
  const ir::Module* module = nullptr;
  const ir::Graph* graph = nullptr;
  /// What was explored, for the page's title line ("--model resnet18 --devices 4").
  std::string source;
  /// --trace: the slices of a trace of `graph` (runtime::readChromeTrace); empty for none.
  std::vector<runtime::TraceSpan> spans;
  /// --metrics: the epochs of a train --metrics CSV; empty for none.
  std::vector<EpochPoint> metrics;
};

/// Communication no compute hid: the parts of device `device`'s comm-stream slices during
/// which its compute stream ran nothing, as [start, end) in the trace's microseconds.
struct ExposedSpan {
  size_t device = 0;
  double start_us = 0, end_us = 0;
};
/// The exposed communication of a trace's slices, per device in time order. Prefetch
/// copies are the input pipeline's, not the step's, and count as neither.
std::vector<ExposedSpan> exposedCommunication(const std::vector<runtime::TraceSpan>& spans,
                                              size_t devices);

/// The document (compact JSON). Nodes are numbered by their position in the graph.
absl::StatusOr<std::string> pageData(const PageInputs& in);

}  // namespace tandem::tools::explore
