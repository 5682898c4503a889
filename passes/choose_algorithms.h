#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `choose-algorithms`: which of its ways the kernel of each node that has a choice runs
/// (a CPU convolution pass: oneDNN's GEMM on plain tensors, its blocked JIT kernel,
/// Winograd, or im2col + matmul over chunks of images), written into the plan as the node's
/// `algo=...` (ir/plan.h) so that `tandem dump` shows it and a hand-edited plan can force
/// one. The choice is each target's rule (ir/target.h, AlgorithmRules: measured per shape
/// and pass), made after assign-layouts because it depends on the layouts around the node;
/// the kernels then run what the plan says. `conv=direct` (`--conv-algorithm direct`)
/// leaves out the algorithms whose rounding differs from the direct computation's
/// (Winograd). Needs assign-streams' plan.
class ChooseAlgorithms final : public Pass {
 public:
  static constexpr absl::string_view kName = "choose-algorithms";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  explicit ChooseAlgorithms(bool exact) : exact_(exact) {}
  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override { return exact_ ? "{conv=direct}" : ""; }

 private:
  bool exact_;
};

}  // namespace tandem::passes
