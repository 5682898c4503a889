#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "ir/ir.h"

namespace tandem::ir {

/// Which drawing of a graph to make. Node scopes are dotted paths ("stage2.block0.conv1");
/// a fused node counts under the first layer it absorbed, a recomputed one under the node
/// it recomputes.
struct DotView {
  /// Scope components kept per box: 1 draws one box per "stage2", 2 per "stage2.block0",
  /// and so on; 0 draws every node (exportDot).
  int collapse = 1;
  /// A scope (at any depth) drawn node by node while the rest stays collapsed; "" for none.
  std::string focus;
};

/// Graphviz DOT for one graph, collapsed by name scope the way TensorBoard's graph view
/// groups: per device one box per scope prefix and phase (forward, backward, update), the
/// tensors between boxes as edge labels (type and count, parallel edges merged), and
/// every collective as its own node (bucket, bytes per device, devices). Drawing every
/// node of a multi-device ResNet takes Graphviz minutes; these stay in the hundreds of
/// boxes. The error names a --focus scope the graph does not have and lists some it does.
absl::StatusOr<std::string> exportDotView(const Graph& g, const DotView& view);

}  // namespace tandem::ir
