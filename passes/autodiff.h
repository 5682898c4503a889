#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `autodiff{lr=0.1,momentum=0,weight-decay=0}`: appends the backward pass and an SGD
/// update per trained variable to @train_step. Momentum > 0 adds a zero-initialized
/// optimizer variable "<var>.momentum" per parameter (and its init).
class Autodiff final : public Pass {
 public:
  static constexpr absl::string_view kName = "autodiff";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  Autodiff(double lr, double momentum, double wd)
      : lr_(lr), momentum_(momentum), weight_decay_(wd) {}
  double lr_, momentum_, weight_decay_;
};

}  // namespace tandem::passes
