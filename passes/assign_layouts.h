#pragma once

#include "absl/container/flat_hash_set.h"
#include "ir/target.h"
#include "passes/pass.h"

namespace tandem::passes {

/// `assign-layouts`: which activations stay in their device's preferred layout between
/// kernels (oneDNN's nChw16c on an AVX-512 CPU, NHWC for cuDNN's tensor cores) instead of
/// the IR's NCHW, written into the plan as each node's `layout=[...]` (ir/plan.h). The
/// rules are each target's data (ir/target.h, LayoutRules: which values may, which op
/// slots take it, which slots share one); this pass only solves them: a union-find over
/// the values, where the 4-D values of linked slots of one node form a group, and a group
/// keeps the layout when every member is eligible, no member sits in a slot that wants
/// plain NCHW, and none is a graph input, graph output or variable storage. Collectives,
/// the host and variables therefore see plain tensors only. Layouts leave every size
/// unchanged (channel counts that pad are not eligible), so the memory plan does not
/// depend on them. Needs assign-streams' plan; `--plain-layout` leaves the pass out.
class AssignLayouts final : public Pass {
 public:
  static constexpr absl::string_view kName = "assign-layouts";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

/// The values assign-layouts keeps in `t`'s preferred layout when every node of `g` runs
/// under t's rules, whatever its device: a target's rules tried on a small graph (tests).
absl::flat_hash_set<const ir::Value*> valuesKeptUnder(const ir::Graph& g, const ir::TargetInfo& t);

}  // namespace tandem::passes
