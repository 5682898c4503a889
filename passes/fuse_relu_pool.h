#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `fuse-relu-pool`: relu -> avg_pool2d (LeNet's conv -> relu -> pool) becomes one
/// avg_pool2d{relu=true} over relu's input, and in @train_step its backward
/// avg_pool2d_backward -> relu_backward one avg_pool2d_backward{relu=true} that masks the
/// gradient where that input is <= 0. relu's output is then neither written nor kept for
/// backward (the pool and its backward read relu's input instead, which the step kept
/// anyway where a convolution made it): one pass over the activations forward and one
/// backward fewer. The kernels apply relu's own per-element math on load, so the numbers
/// are those of the unfused ops bit for bit. Only where relu's output feeds nothing else
/// and is no graph output. Runs after autodiff, before replicate.
class FuseReluPool final : public Pass {
 public:
  static constexpr absl::string_view kName = "fuse-relu-pool";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
