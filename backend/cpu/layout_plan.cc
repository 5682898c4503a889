#include "backend/cpu/layout_plan.h"

#include "ir/layout_rules.h"

namespace tandem::backend::cpu {

absl::flat_hash_set<const ir::Value*> channelBlockedValues(const ir::Graph& g) {
  return ir::valuesPlannedIn(g, ir::ActivationLayout::kChannelBlocked);
}

}  // namespace tandem::backend::cpu
