#pragma once

// The roofline cost of a node's work on one GPU: max(flops / peak, bytes / bandwidth).

#include "ir/ir.h"
#include "sim/cost_model.h"
#include "sim/gpu_specs.h"

namespace tandem::sim {

/// The work of one node (ir/op_cost.h: flops by the formula its op spec names).
using NodeWork = ir::OpWork;

/// The arithmetic and memory traffic of one compute node (one device's share), by the cost
/// formula its op's spec names (ir/ops.td): convolution and linear passes count 2 * output
/// elements * (filter elements per output channel), memory-bound ops their flops per result
/// element; graph inputs, params, constants and collectives do no work here.
NodeWork nodeWork(const ir::Node& n);

/// The roofline time of `w` on `gpu`.
double rooflineSeconds(const NodeWork& w, const GpuSpec& gpu);

/// Bytes one device contributes to a collective: its operands' bytes (the operands of a
/// collective are grouped device-major, the same count per device); for an all_gather the
/// buffer it gathers (its result), which is what the cost models take.
double collectiveBytesPerDevice(const ir::Node& n);

/// Seconds collective `n` takes among `p` devices by the alpha-beta models: an all_reduce's
/// (reduce), half of it for a reduce_scatter or all_gather; 0 for a split or broadcast (the
/// host's copy, which the simulator does not cost).
double collectiveSeconds(const ir::Node& n, int64_t p, const Topology& topo);

}  // namespace tandem::sim
