#pragma once

// The roofline cost of a node's work on one GPU: max(flops / peak, bytes / bandwidth).

#include "ir/ir.h"
#include "sim/gpu_specs.h"

namespace tandem::sim {

struct NodeWork {
  double flops = 0;            // multiply-adds count 2
  double bytes = 0;            // every operand read once, every result written once
  bool low_precision = false;  // a bf16 operand: the bf16 peak applies
};

/// The arithmetic and memory traffic of one compute node (one device's share). Convolution
/// and linear passes count 2 * output elements * (filter elements per output channel);
/// every other op is elementwise-like and memory bound, counted one flop per result element.
/// Graph inputs, params and constants do no work.
NodeWork nodeWork(const ir::Node& n);

/// The roofline time of `w` on `gpu`.
double rooflineSeconds(const NodeWork& w, const GpuSpec& gpu);

/// Bytes one device contributes to a collective: its operands' bytes (the operands of a
/// collective are grouped device-major, the same count per device).
double collectiveBytesPerDevice(const ir::Node& n);

}  // namespace tandem::sim
