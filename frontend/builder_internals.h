#pragma once

// The Builder's graph-level entry points, for the code that lowers a model to IR
// (buildModule, the ONNX importer) and its tests. Not part of the public API and not
// installed: a model reaches the graph only through the layer methods.

#include <cstddef>
#include <source_location>
#include <utility>

#include "absl/strings/string_view.h"
#include "frontend/builder.h"
#include "ir/ir.h"

namespace tandem {

class BuilderInternals {
 public:
  /// A builder of `module`'s graphs, with no graph begun yet.
  static Builder make(ir::Module& module, const BuildOptions& opts) {
    return Builder(module, opts);
  }
  /// Which graph of the module the next layers go to, and whether it is the training step.
  static void beginGraph(Builder& b, ir::Graph* g, bool training) { b.beginGraph(g, training); }
  /// A graph input of the current graph.
  static Tensor addInput(Builder& b, absl::string_view name, ir::TensorType type) {
    return b.addInput(name, std::move(type));
  }
  /// The node `spec` describes in the current scope, named after `layer` (Builder::addNode).
  static Tensor addNode(Builder& b, ir::NodeSpec spec, absl::string_view layer,
                        std::source_location loc, size_t result = 0) {
    return b.addNode(std::move(spec), layer, loc, result);
  }
};

}  // namespace tandem
