#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `clip-grad-norm{max-norm=X}`: on each device, one clip_grad_norm over every gradient
/// the device's optimizer updates read (the all-reduced sums in a data-parallel step), and
/// the updates read its results: gradient clipping by global norm, as
/// torch.nn.utils.clip_grad_norm_ before optimizer.step(). After insert-collectives, so
/// that every device clips the same sums by the same factor; before schedule and
/// group-updates, which order and group the updates as they read the clipped values.
class ClipGradNorm final : public Pass {
 public:
  static constexpr absl::string_view kName = "clip-grad-norm";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  explicit ClipGradNorm(double max_norm) : max_norm_(max_norm) {}
  double max_norm_;
};

}  // namespace tandem::passes
