#pragma once

// Which activations a device keeps in its preferred layout between kernels instead of the
// IR's plain NCHW: nChw16c on an AVX-512 CPU (backend/cpu/layout_plan.h), NHWC on a GPU
// (backend/cuda/layout_plan.h). The IR stays device-neutral; each backend describes which
// values could take its layout and which op slots take it, and this one piece of code
// finds the values every kernel that touches them can take in that layout.
//
// The plan: union-find over the graph's values. Slots of one node that must share a layout
// (the 4-D tensors of a fused batch-norm node, the operands and result of add) join their
// values into one group; a group keeps the alternative layout when every member is
// eligible (the backend's dtype and shape rule), no member sits in a slot that wants plain
// NCHW, and none is a graph input, a graph output or variable storage (`param`).
// Collectives, the host and variables therefore only ever see plain tensors.

#include <cstddef>
#include <functional>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "ir/ir.h"

namespace tandem::backend {

/// What a backend's kernels take.
struct LayoutRules {
  /// Whether value `v` may be kept in the alternative layout at all (dtype, shape; a value
  /// that is not 4-D never is, whatever this says).
  std::function<bool(const ir::Value& v)> eligible;
  /// Which layout the kernel of `op` takes in operand (result == false) or result slot
  /// `index`: nullopt, plain only; else a link: the 4-D values in slots of one node with
  /// the same link share a layout, and a slot whose link no other slot has takes either
  /// layout on its own. (Non-4-D values in a linked slot are plain and join nothing.)
  std::function<std::optional<int>(ir::Op op, bool result, size_t index)> slot;
};

/// The values of `g` to keep in the alternative layout under `rules`.
absl::flat_hash_set<const ir::Value*> alternativeLayoutValues(const ir::Graph& g,
                                                              const LayoutRules& rules);

}  // namespace tandem::backend
