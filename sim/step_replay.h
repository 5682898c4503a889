#pragma once

// Turns a compiled step into the event simulation's input: one device's shares of the
// graph in issue order, with the cross-stream waits of its execution plan (ir/plan.h),
// the very ones the executor makes events of, and a cost per node.

#include <functional>
#include <vector>

#include "ir/ir.h"
#include "sim/event_sim.h"

namespace tandem::sim {

/// Seconds a node's share takes on the device (compute or collective).
using NodeCost = std::function<double(const ir::Node&)>;

/// Device `device`'s shares of `g` in issue order; `g` has a plan with events. A wait on another
/// device's share of a node (a collective's peers, a concat's slices) becomes a wait on this
/// device's share of the same node: the devices of a data-parallel step run the same work, so one
/// device's streams stand for all of them, a collective ending on all at once.
std::vector<SimOp> deviceSchedule(const ir::Module& m, const ir::Graph& g, size_t device,
                                  const NodeCost& cost);

}  // namespace tandem::sim
