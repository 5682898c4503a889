#pragma once

#include "absl/status/status.h"
#include "ir/ir.h"

namespace tandem::ir {

/// Checks the invariants every pass must keep (DESIGN.md section 2) and returns the first
/// violation as "graph @G: <node>: <what was expected>":
///  - every node's result types are what its shape rule gives (types and shapes agree);
///  - every operand is defined earlier in the same graph (so the graph is acyclic);
///  - placement: nodes are placed on module devices once the module is replicated, and a
///    non-collective node's operands live on its own device (only collectives cross);
///  - state: no variable is read after it was written on the same device in one graph,
///    nor written twice;
///  - gradients: each value feeds at most one all_reduce, and on several devices every
///    sgd_update takes an all-reduced gradient once any all_reduce exists;
///  - @predict_step (ir/predict_graph.h) returns its per-example outputs per device, each
///    with its device's rows, none made by a collective;
///  - collectives span all module devices with one operand group per device; being single
///    nodes, they are issued in the same order on every device by construction.
/// verifyModule also checks each graph's execution plan (ir/plan_verifier.h).
absl::Status verifyModule(const Module& m);
absl::Status verifyGraph(const Graph& g);

}  // namespace tandem::ir
