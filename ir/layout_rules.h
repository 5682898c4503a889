#pragma once

// The activation layouts of a plan against what the kernels take (ir/target.h's
// LayoutRules): which target's rules a node runs under, and whether a node's slots hold
// layouts its kernel can take. assign-layouts (passes/assign_layouts.h) plans under these
// rules; the plan verifier and the CUDA backend (when it makes a kernel) check with them.

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "ir/ir.h"
#include "ir/target.h"

namespace tandem::ir {

/// The target whose layout rules a node runs under: its device's, where that target
/// prefers a layout other than plain NCHW; null (everything plain) for collectives, which
/// move plain tensors between devices, and for devices of a kind that keeps none. Caches
/// the registry's answer per device kind: asked once per node of large modules.
class LayoutTargets {
 public:
  const TargetInfo* of(const Node& n);

 private:
  std::vector<std::optional<const TargetInfo*>> by_kind_;
};

/// Which layout `t`'s kernel of `n` takes in that slot (LayoutRules::slot); nullopt, plain
/// only, when `t` is null.
std::optional<int> layoutSlot(const TargetInfo* t, const Node& n, bool result, size_t index);

/// OK when the kernel of `n`, under `t` (LayoutTargets::of), takes every operand and result
/// in the layout `layout_of` gives it: a value that is not plain sits only in slots that
/// take t's layout, and the 4-D values of slots that share a link share a layout. Else an
/// error naming the node, the slot, the value and both layouts.
absl::Status checkNodeLayouts(const Node& n, const TargetInfo* t,
                              absl::FunctionRef<ActivationLayout(const Value&)> layout_of);

/// Whether `v` (a result of a node under `t`) may be kept in t's preferred layout at all: a
/// 4-D value t's rules find eligible, made by a kernel (not a graph input or variable
/// storage). False when `t` is null.
bool mayKeepLayout(const Value& v, const TargetInfo* t);

/// OK when `v` (a result of a node under `t`) may be kept in `layout` at all: plain always;
/// else t's preferred layout where mayKeepLayout. Else an error naming the value.
absl::Status checkValueLayout(const Value& v, const TargetInfo* t, ActivationLayout layout);

/// The values the plan of `g` keeps in `layout` (assign-layouts): what a backend's kernels
/// are made for. Empty when `g` has no plan or its plan no layouts.
absl::flat_hash_set<const Value*> valuesPlannedIn(const Graph& g, ActivationLayout layout);

}  // namespace tandem::ir
