#pragma once

#include <vector>

#include "ir/ir.h"
#include "passes/pass.h"

namespace tandem::passes {

/// `autodiff{lr=0.1,momentum=0,weight-decay=0}`: appends the backward pass and an optimizer
/// update per trained variable to @train_step. `optimizer=OP` names the update op (default
/// sgd_update; any op whose spec declares it an optimizer, ir/interfaces.h), and every
/// other option is one of its attributes (weight-decay for weight_decay). Each state the
/// optimizer declares gets an optimizer variable "<var>.<suffix>" per parameter with its
/// init (SGD: "<var>.momentum", zeros, when momentum > 0). `decay=matrices` keeps weight
/// decay to the weights of linear, conv2d and matmul (the others' updates get
/// weight_decay 0: the parameter groups of nanoGPT and timm); `decay=all`, the default,
/// decays every trained variable as torch.optim does.
class Autodiff final : public Pass {
 public:
  static constexpr absl::string_view kName = "autodiff";
  /// The update op without an `optimizer` option: plain SGD, as the options' defaults
  /// (momentum 0, no weight decay) make it.
  static constexpr ir::Op kDefaultOptimizer = ir::Op::kSgdUpdate;
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);
  /// The options for help texts, from the optimizer ops' declarations: "optimizer=sgd
  /// (default)|adamw; sgd: lr=0.1, momentum=0, weight-decay=0; adamw: lr=0.001, ...".
  static absl::string_view optionsHelp();

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  Autodiff(ir::Op optimizer, std::vector<ir::AttrValue> hyper, bool decay_matrices_only)
      : optimizer_(optimizer),
        hyper_(std::move(hyper)),
        decay_matrices_only_(decay_matrices_only) {}
  ir::Op optimizer_;
  std::vector<ir::AttrValue> hyper_;  // the optimizer's attributes, in its spec's order
  bool decay_matrices_only_;          // decay=matrices: weight_decay 0 off the matrices
};

}  // namespace tandem::passes
