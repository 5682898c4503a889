#pragma once

#include <string>

#include "ir/ir.h"

namespace tandem::ir {

/// Graphviz DOT for one graph: a cluster per device, host values outside, collectives
/// drawn as bold orange boxes between the clusters. Render with `dot -Tsvg`.
std::string exportDot(const Graph& g);

}  // namespace tandem::ir
