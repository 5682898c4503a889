#pragma once

// Which activations a CUDA device keeps in NHWC (channels last) between kernels instead of
// the IR's NCHW: what the plan's assign-layouts says (passes/assign_layouts.h, under the
// CUDA target's rules in target_info.cc; --plain-layout: none). Collectives, the host,
// variables and every kernel outside the rules see NCHW, as the IR describes it.

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "ir/ir.h"

namespace tandem::backend::cuda {

/// The values the plan of `g` keeps in NHWC (none without a plan or its layouts).
absl::flat_hash_set<const ir::Value*> nhwcValues(const ir::Graph& g);

/// OK when the kernel of `node` takes every operand and result in the layout `nhwc`
/// gives it (values in the set NHWC, others NCHW), by the CUDA target's rules; else an
/// internal error naming the node and the slot. Kernels are made only after this check.
absl::Status checkNhwcSlots(const ir::Node& node,
                            const absl::flat_hash_set<const ir::Value*>& nhwc);

}  // namespace tandem::backend::cuda
