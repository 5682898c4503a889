// Softmax cross-entropy (label smoothing included), its backward op and accuracy on CUDA:
// own kernels (cross_entropy.cu, loss.cu) that compute as the CPU does
// (backend/cross_entropy_math.h: a max-shifted log-sum-exp in double, the loss summed in
// double), the scalar results reduced in a fixed order so that every run gives the same
// bits. f32 logits, i32 labels; a negative label is padding.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cross_entropy_launch.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/loss_launch.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

enum class LossOp { kForward, kBackward, kAccuracy };

class LossKernel final : public CudaKernel {
 public:
  LossKernel(CudaContext& ctx, LossOp op, double divisor, double smoothing)
      : CudaKernel(ctx), op_(op), divisor_(divisor), smoothing_(smoothing) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    const float* logits = in[0].f32();
    const int32_t* labels = in[1].i32();
    const int64_t rows = in[0].dim(0), classes = in[0].dim(1);
    switch (op_) {
      case LossOp::kForward:
        launchSmoothedCrossEntropy(logits, labels, rows, classes, smoothing_, divisor_,
                                   out[0].f32(), stream);
        break;
      case LossOp::kBackward:
        launchSmoothedCrossEntropyBackward(logits, labels, in[2].f32(), rows, classes, smoothing_,
                                           divisor_, out[0].f32(), stream);
        break;
      case LossOp::kAccuracy:
        launchAccuracy(logits, labels, rows, classes, out[0].i32(), stream);
        break;
    }
    return absl::OkStatus();
  }

 private:
  LossOp op_;
  double divisor_;
  double smoothing_;  // label_smoothing (0 for accuracy)
};

absl::Status checkOperands(const ir::Node& node) {
  const ir::TensorType& t = node.operand(0)->type();
  if (t.dtype != ir::DType::kF32)
    return absl::UnimplementedError(absl::StrCat(
        node.describe(), ": the CUDA kernel supports f32 logits, not ", ir::dtypeName(t.dtype)));
  if (t.shape.size() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": the logits are ", ir::toString(t), ", not [N,C]"));
  // Every row needs a maximum.
  if (t.shape[1] < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": the logits have no classes"));
  if (node.operand(1)->type().dtype != ir::DType::kI32)
    return absl::UnimplementedError(absl::StrCat(node.describe(),
                                                 ": the CUDA kernel takes i32 labels, not ",
                                                 ir::dtypeName(node.operand(1)->type().dtype)));
  return absl::OkStatus();
}

/// What a reduction divides the summed loss by: `divisor` (the global batch) for mean.
double lossScale(const ir::Node& node) {
  return ir::attr::reduction(node) == ir::Reduction::kMean
             ? static_cast<double>(ir::attr::divisor(node))
             : 1.0;
}

KernelOr makeLoss(const KernelInit& init, LossOp op) {
  RETURN_IF_ERROR(checkOperands(init.node));
  if (op == LossOp::kAccuracy)
    return std::unique_ptr<CudaKernel>(new LossKernel(init.ctx, op, 1.0, 0.0));
  return std::unique_ptr<CudaKernel>(
      new LossKernel(init.ctx, op, lossScale(init.node), ir::attr::label_smoothing(init.node)));
}

}  // namespace

KernelOr makeSoftmaxCrossEntropyKernel(const KernelInit& init) {
  return makeLoss(init, LossOp::kForward);
}

KernelOr makeSoftmaxCrossEntropyBackwardKernel(const KernelInit& init) {
  return makeLoss(init, LossOp::kBackward);
}

KernelOr makeAccuracyKernel(const KernelInit& init) { return makeLoss(init, LossOp::kAccuracy); }

}  // namespace tandem::backend::cuda
