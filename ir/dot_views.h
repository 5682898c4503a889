#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

/// Which part of a training step a node belongs to: autodiff made it or it reads what
/// backward made (the casts and collectives of gradients) is backward; an optimizer
/// update is the update; the rest is forward.
enum class StepPhase : uint8_t { kForward, kBackward, kUpdate };
/// "forward", "backward", "update".
absl::string_view phaseName(StepPhase p);
/// The phase of every node of `g`, by node id.
std::vector<StepPhase> stepPhases(const Graph& g);

/// The layer path of every node of `g`, by node id: its own scope's first layer ("stage2.
/// block0.conv1"; a fused node's first, a recomputed one's without " (recomputed)"), or
/// for nodes the builder made outside any layer what they touch: params, initializers and
/// assigns their variable's layer, others (the updates) their first operand's; "" for
/// none. The views below and `tandem explore` group by it.
std::vector<std::string> layerPaths(const Graph& g);

/// Graphviz DOT for one graph, collapsed by name scope the way TensorBoard's graph view
/// groups: per device one box per scope prefix and phase (forward, backward, update), the
/// tensors between boxes as edge labels (type and count, parallel edges merged), and
/// every collective as its own node (bucket, bytes per device, devices). Drawing every
/// node of a multi-device ResNet takes Graphviz minutes; these stay in the hundreds of
/// boxes. The error names a --focus scope the graph does not have and lists some it does.
absl::StatusOr<std::string> exportDotView(const Graph& g, const DotView& view);

}  // namespace tandem::ir
