#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `fuse-conv-relu-pool`: conv2d -> avg_pool2d{relu} over 2x2 windows of stride 2 (LeNet's
/// first layer, after fuse-relu-pool) becomes one conv2d_relu_avg_pool, which also keeps
/// relu's mask (a bit per convolution output, a row an i32), and in @train_step its
/// backward avg_pool2d_backward{relu} -> conv2d_backward_filter one
/// conv2d_relu_avg_pool_backward_filter that spreads the pooled gradient by the mask. The
/// convolution's output and its gradient, four times the pooled output each, are then
/// never in memory (LeNet: 6.9 MB each a device at batch 128, which the pool, its backward
/// and the filter gradient each streamed through).
///
/// Only where that is complete and the kernels are the fast ones: the convolution's input
/// gets no gradient (nothing reads the pool's gradient but the filter gradient: a first
/// layer), each output sums at most 9 products (a few input channels: where the
/// convolution's output dwarfs its input), its rows are at most 32 wide (the mask's i32),
/// f32, and the convolution's output feeds nothing else. Runs after fuse-relu-pool, before
/// replicate. The default pipeline includes it where every device's target has the fused
/// kernels (CPU; not CUDA yet).
class FuseConvReluPool final : public Pass {
 public:
  static constexpr absl::string_view kName = "fuse-conv-relu-pool";
  /// The most products a fused convolution's output sums.
  static constexpr int64_t kMaxTaps = 9;
  /// The widest convolution rows: relu's mask keeps a row in an i32.
  static constexpr int64_t kMaxRowWidth = 32;
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
