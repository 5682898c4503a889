#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `feed-learning-rate`: gives every optimizer update of @train_step the learning-rate
/// schedule's factor as its last operand: a read of `@lr_scale`, an f32[1] variable of
/// role `fed` (initialized to 1) that the runtime writes before every step. The updates
/// use lr * factor, so a schedule changes the learning rate each step without a
/// recompile. Runs after autodiff and before replicate (each replica reads its device's
/// copy); a module that has the variable already is left as it is.
class FeedLearningRate final : public Pass {
 public:
  static constexpr absl::string_view kName = "feed-learning-rate";
  /// The variable the runtime writes.
  static constexpr absl::string_view kVar = ir::kLrScaleVar;
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
