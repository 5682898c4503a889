#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem::ir {

/// Graphviz DOT for one graph: a cluster per device, host values outside, collectives
/// drawn as bold orange boxes between the clusters. Render with `dot -Tsvg`.
std::string exportDot(const Graph& g);

/// The pieces of a node's drawing, shared with the collapsed views (dot_views.h).
std::string dotEscape(absl::string_view s);
std::string dotNodeLabel(const Node& n);
std::string dotNodeStyle(const Node& n);

}  // namespace tandem::ir
