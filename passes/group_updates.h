#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `group-updates`: folds the optimizer updates of one device that become ready
/// together into their optimizer's grouped form (ir/interfaces.h: sgd_update into
/// sgd_update_group, adamw_update into adamw_update_group), which a GPU runs as one
/// multi-tensor launch instead of one launch per parameter (ResNet-18: 62 updates per
/// device and step). "Ready together": their gradients come from the same all_reduce (one
/// bucket), or, on a single device, all of them; and they share the optimizer, its
/// attributes (lr, momentum, betas, ...) and the gradient dtype. The group takes the place of its last
/// member, so every operand is defined before it and every write moves later, never before a read.
/// An update alone in its group stays as it was. The default pipeline runs it for devices whose
/// target does multi-tensor updates (ir/target.h; after schedule, so each bucket's group sits where
/// the bucket's updates were).
class GroupUpdates final : public Pass {
 public:
  static constexpr absl::string_view kName = "group-updates";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
