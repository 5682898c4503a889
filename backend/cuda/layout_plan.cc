#include "backend/cuda/layout_plan.h"

#include "backend/cuda/target_info.h"
#include "ir/layout_rules.h"

namespace tandem::backend::cuda {

absl::flat_hash_set<const ir::Value*> nhwcValues(const ir::Graph& g) {
  return ir::valuesPlannedIn(g, ir::ActivationLayout::kChannelsLast);
}

absl::Status checkNhwcSlots(const ir::Node& node,
                            const absl::flat_hash_set<const ir::Value*>& nhwc) {
  // The rules as the target states them (not the registry's copy, which tests replace).
  static const ir::TargetInfo* target = new ir::TargetInfo(targetInfo());
  absl::Status s = ir::checkNodeLayouts(node, target, [&](const ir::Value& v) {
    return nhwc.contains(&v) ? ir::ActivationLayout::kChannelsLast : ir::ActivationLayout::kPlain;
  });
  if (s.ok()) return s;
  return absl::InternalError(s.message());
}

}  // namespace tandem::backend::cuda
