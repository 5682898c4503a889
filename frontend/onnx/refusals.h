#pragma once

// The report of an ONNX model Tandem cannot import: every node it refuses, found in one
// walk of the whole graph, grouped by op type so that a model with many refusals (16
// Pad nodes) reads as a few lines rather than a cut-off list.

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tandem::onnx_import {

/// One node (or graph output) the importer refuses, and why.
struct Refusal {
  std::string op;    // the node's op type ("Conv"; "graph output" for an output)
  std::string node;  // how a group's line names it: "'conv1'", or "#3 (output 'y')"
  std::string why;   // "mode reflect", or empty (no converter)
  std::string line;  // the whole of it, as a report of it alone says it
  int index = 0;     // the node's in the graph (the report lists op types in this order)
};

/// Op types listed one line each; past this many, one line counts the rest.
inline constexpr size_t kMaxRefusedOpTypes = 20;
/// Nodes named on an op type's line; the rest are counted.
inline constexpr size_t kNodesNamedPerOpType = 3;

/// kUnimplemented naming `refusals` (at least one) of a graph of `nodes`
/// nodes; `unchecked` nodes read a refused node's results where ONNX's shape inference
/// gave no shape to check them with. One refusal is one line: "`what`: Tandem does not
/// support 1 node: node 'r' (Elu)". Several are a first line with the total, then one
/// line per op type, indented two spaces (the CLI prints such lines as they are):
///   ONNX model 'm.onnx': Tandem does not support 17 of its 240 nodes, of 2 op types:
///     Pad (16 nodes): 'p1': mode reflect; 'p2': ...; and 13 more
///     Elu (1 node): 'e'
absl::Status refusalError(const std::string& what, std::vector<Refusal> refusals, int nodes,
                          int unchecked);

}  // namespace tandem::onnx_import
