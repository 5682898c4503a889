#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `fuse-conv-bn-relu`: replaces, in forward and backward, the chains
///   conv2d -> batch_norm -> relu, conv2d -> batch_norm -> add -> relu (the residual join)
///   and conv2d -> batch_norm
/// by fused nodes (ir/ops/fused_ops.cc). In @train_step (batch_norm in training mode):
///   conv2d_stats (the convolution and its output's batch statistics),
///   batch_norm_apply (normalize, scale, shift, + residual, relu: one pass),
///   batch_norm_backward_reduce and batch_norm_backward_apply (relu's mask taken from the
///   output, the residual's gradient given once), in place of relu_backward and
///   batch_norm_backward; batch norm's output before relu is no longer kept for backward.
/// In @eval_step (running statistics): fold_batch_norm and conv2d_bias_act, the
/// convolution with folded weights and bias, + residual, relu.
/// Each fused node's scope lists the layers it absorbed ("conv1 + bn1 + relu"). Runs after
/// autodiff, before replicate; numerics are unchanged up to float rounding.
class FuseConvBnRelu final : public Pass {
 public:
  static constexpr absl::string_view kName = "fuse-conv-bn-relu";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
