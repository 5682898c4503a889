// Softmax cross-entropy (label smoothing, class axis, ignore_index, class weights and a
// total included), its backward op, target_weight_sum and accuracy on CUDA:
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

/// softmax_cross_entropy's shape and settings: the logits as [rows, classes, inner]
/// around the class axis, where the class weights and the total are among the operands
/// (-1: absent).
struct CrossEntropyShape {
  int64_t rows = 0, classes = 0, inner = 1;
  double divisor = 1.0, smoothing = 0.0;
  int64_t ignore_index = -100;
  int weight = -1, total = -1;
  /// The [N, C] loss of before class axes, weights and totals: its own kernels, its bits.
  bool plain() const { return inner == 1 && weight < 0 && total < 0 && ignore_index < 0; }
};

class LossKernel final : public CudaKernel {
 public:
  LossKernel(CudaContext& ctx, LossOp op, const CrossEntropyShape& shape)
      : CudaKernel(ctx), op_(op), shape_(shape) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    const float* logits = in[0].f32();
    const int32_t* labels = in[1].i32();
    const CrossEntropyShape& s = shape_;
    if (op_ == LossOp::kAccuracy) {
      launchAccuracy(logits, labels, in[0].dim(0), in[0].dim(1), out[0].i32(), stream);
      return absl::OkStatus();
    }
    if (s.plain()) {
      if (op_ == LossOp::kForward)
        launchSmoothedCrossEntropy(logits, labels, s.rows, s.classes, s.smoothing, s.divisor,
                                   out[0].f32(), stream);
      else
        launchSmoothedCrossEntropyBackward(logits, labels, in[2].f32(), s.rows, s.classes,
                                           s.smoothing, s.divisor, out[0].f32(), stream);
      return absl::OkStatus();
    }
    const CrossEntropyLaunch a{
        .logits = logits,
        .labels = labels,
        .weight = s.weight >= 0 ? in[static_cast<size_t>(s.weight)].f32() : nullptr,
        .total = s.total >= 0 ? in[static_cast<size_t>(s.total)].f32() : nullptr,
        .rows = s.rows,
        .classes = s.classes,
        .inner = s.inner,
        .smoothing = s.smoothing,
        .divisor = s.divisor,
        .ignore_index = s.ignore_index};
    if (op_ == LossOp::kForward)
      launchCrossEntropy(a, out[0].f32(), stream);
    else
      launchCrossEntropyBackward(a, in[2].f32(), out[0].f32(), stream);
    return absl::OkStatus();
  }

 private:
  LossOp op_;
  CrossEntropyShape shape_;
};

/// target_weight_sum over labels of any shape, with or without class weights.
class TargetWeightSumKernel final : public CudaKernel {
 public:
  TargetWeightSumKernel(CudaContext& ctx, int64_t ignore_index)
      : CudaKernel(ctx), ignore_index_(ignore_index) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    const bool weighted = in.size() > 1;
    launchTargetWeightSum(in[0].i32(), in[0].numElements(), ignore_index_,
                          weighted ? in[1].f32() : nullptr, weighted ? in[1].dim(0) : 0,
                          out[0].f32(), stream);
    return absl::OkStatus();
  }

 private:
  int64_t ignore_index_;
};

absl::Status checkOperands(const ir::Node& node, bool any_axis) {
  const ir::TensorType& t = node.operand(0)->type();
  if (t.dtype != ir::DType::kF32)
    return absl::UnimplementedError(absl::StrCat(
        node.describe(), ": the CUDA kernel supports f32 logits, not ", ir::dtypeName(t.dtype)));
  if (!any_axis && t.shape.size() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": the logits are ", ir::toString(t), ", not [N,C]"));
  const auto axis = any_axis ? static_cast<size_t>(ir::attr::axis(node)) : size_t{1};
  // Every row needs a maximum.
  if (axis >= t.shape.size() || t.shape[axis] < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": the logits have no classes"));
  if (node.operand(1)->type().dtype != ir::DType::kI32)
    return absl::UnimplementedError(absl::StrCat(node.describe(),
                                                 ": the CUDA kernel takes i32 labels, not ",
                                                 ir::dtypeName(node.operand(1)->type().dtype)));
  return absl::OkStatus();
}

/// The loss's shape around its class axis, its reduction's divisor (`divisor`, the global
/// batch, for mean) and where its optional operands are (`first`: the index after the
/// labels, and dloss for the backward op).
CrossEntropyShape crossEntropyShape(const ir::Node& node, int first) {
  const ir::TensorType& logits = node.operand(0)->type();
  const auto axis = static_cast<size_t>(ir::attr::axis(node));
  CrossEntropyShape s;
  s.rows = 1;
  for (size_t i = 0; i < axis; ++i) s.rows *= logits.shape[i];
  s.classes = logits.shape[axis];
  for (size_t i = axis + 1; i < logits.shape.size(); ++i) s.inner *= logits.shape[i];
  s.divisor = ir::attr::reduction(node) == ir::Reduction::kMean
                  ? static_cast<double>(ir::attr::divisor(node))
                  : 1.0;
  s.smoothing = ir::attr::label_smoothing(node);
  s.ignore_index = ir::attr::ignore_index(node);
  int next = first;
  if (ir::attr::weighted(node)) s.weight = next++;
  if (static_cast<int>(node.numOperands()) > next) s.total = next;
  return s;
}

KernelOr makeLoss(const KernelInit& init, LossOp op) {
  RETURN_IF_ERROR(checkOperands(init.node, op != LossOp::kAccuracy));
  if (op == LossOp::kAccuracy)
    return std::unique_ptr<CudaKernel>(new LossKernel(init.ctx, op, CrossEntropyShape{}));
  return std::unique_ptr<CudaKernel>(
      new LossKernel(init.ctx, op, crossEntropyShape(init.node, op == LossOp::kForward ? 2 : 3)));
}

}  // namespace

KernelOr makeSoftmaxCrossEntropyKernel(const KernelInit& init) {
  return makeLoss(init, LossOp::kForward);
}

KernelOr makeSoftmaxCrossEntropyBackwardKernel(const KernelInit& init) {
  return makeLoss(init, LossOp::kBackward);
}

KernelOr makeAccuracyKernel(const KernelInit& init) { return makeLoss(init, LossOp::kAccuracy); }

KernelOr makeTargetWeightSumKernel(const KernelInit& init) {
  if (init.node.operand(0)->type().dtype != ir::DType::kI32)
    return absl::UnimplementedError(
        absl::StrCat(init.node.describe(), ": the CUDA kernel takes i32 labels"));
  return std::unique_ptr<CudaKernel>(
      new TargetWeightSumKernel(init.ctx, ir::attr::ignore_index(init.node)));
}

}  // namespace tandem::backend::cuda
