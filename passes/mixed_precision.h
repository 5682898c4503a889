#pragma once

#include "ir/types.h"
#include "passes/pass.h"

namespace tandem::passes {

/// `mixed-precision{dtype=bf16}`: rewrites the forward graphs (@train_step before
/// autodiff, and @eval_step) so that activations flow in bf16 while every variable stays
/// f32, the way PyTorch's autocast and XLA's bf16 training split the work:
///  - ops marked kLowPrecision in the op table (conv2d, linear) compute in bf16: an f32
///    activation operand is cast down. Their weights stay the f32 master variables, read
///    as they are: the shape rules admit f32 weights beside bf16 activations, and the
///    kernels convert them in the reorder they do anyway, so no weight cast is a node.
///  - ops marked kFullPrecision (the loss, accuracy) take f32: bf16 operands are cast up.
///  - every other op follows its operands (relu, pooling, add, flatten in bf16; batch norm
///    with bf16 activations and f32 parameters, statistics and running averages); where
///    activations of both dtypes meet, the f32 ones are cast down.
/// Each value is cast at most once per dtype, right before its first reader. Autodiff,
/// run after this pass, derives the backward from the rewritten forward: gradients flow in
/// bf16 through the activations and arrive f32 at the variables (a cast's gradient is the
/// cast back), so the gradient all_reduce and the SGD update stay f32.
class MixedPrecision final : public Pass {
 public:
  static constexpr absl::string_view kName = "mixed-precision";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  explicit MixedPrecision(ir::DType low) : low_(low) {}
  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  ir::DType low_;
};

}  // namespace tandem::passes
