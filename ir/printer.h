#pragma once

#include <string>

#include "ir/ir.h"

namespace tandem::ir {

/// How much the printer writes besides the program itself.
struct PrintOptions {
  /// Append loc("scope", "file:line") to nodes. Off gives the canonical form used by
  /// golden files, which does not change when model source lines move.
  bool locations = true;
};

/// The textual IR (docs/IR.md). parseModule(printModule(m)) prints identically.
std::string printModule(const Module& m, const PrintOptions& opts = {});
std::string printGraph(const Graph& g, const PrintOptions& opts = {});
/// A node's attributes as the printer writes them after its operands: " {stride=1, pad=0}",
/// optional ones at their default left out; "" for none.
std::string printAttributes(const Node& n);
/// One node as the printer writes it (without indentation or newline).
std::string printNode(const Node& n, const PrintOptions& opts = {});

}  // namespace tandem::ir
