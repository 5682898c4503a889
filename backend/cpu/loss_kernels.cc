// softmax_cross_entropy (label smoothing, class weights, ignore_index and any class axis
// included), its backward op, target_weight_sum and accuracy: plain loops over the
// logits. C is small (10 classes) and N a per-device batch, so these cost nothing next to
// the layers; they are written for exactness (max-subtracted log-sum-exp, double sums).
//
// Rows with a negative label are padding of a last partial batch: they add no loss, get a
// zero gradient and never count as correct. A label >= C is a bug in the data pipeline
// (the runtime checks every batch's labels, runtime/label_check.h): the loss core makes
// its row's loss NaN rather than read past the row.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cpu/cross_entropy_core.h"
#include "backend/cpu/kernels.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

absl::Status checkLogits(const ir::Node& node, int64_t axis = 1) {
  const ir::TensorType& t = node.operand(0)->type();
  if (t.dtype != ir::DType::kF32)
    return absl::UnimplementedError(absl::StrCat(
        node.describe(), ": the CPU kernel supports f32 logits, not ", ir::dtypeName(t.dtype)));
  // Every row needs a maximum.
  if (t.shape[static_cast<size_t>(axis)] < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": the logits have no classes"));
  return absl::OkStatus();
}

/// The loss's targets ([rows, classes, inner] around the class axis), smoothing, ignored
/// label and what a reduction divides the summed loss by: `divisor` (the global batch)
/// for mean; a `total` operand replaces it where the kernel runs.
CrossEntropySpec specOf(const ir::Node& node) {
  const ir::TensorType& logits = node.operand(0)->type();
  const auto axis = static_cast<size_t>(ir::attr::axis(node));
  int64_t rows = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) rows *= logits.shape[i];
  for (size_t i = axis + 1; i < logits.shape.size(); ++i) inner *= logits.shape[i];
  return CrossEntropySpec{.rows = rows,
                          .classes = logits.shape[axis],
                          .smoothing = ir::attr::label_smoothing(node),
                          .divisor = ir::attr::reduction(node) == ir::Reduction::kMean
                                         ? static_cast<double>(ir::attr::divisor(node))
                                         : 1.0,
                          .inner = inner,
                          .ignore_index = ir::attr::ignore_index(node)};
}

/// Where the class weights and the total are among the operands (-1: absent); `first`
/// is the index after the labels (and dloss).
struct CrossEntropyOperands {
  int weight = -1, total = -1;
};
CrossEntropyOperands operandsOf(const ir::Node& node, int first) {
  CrossEntropyOperands o;
  int next = first;
  if (ir::attr::weighted(node)) o.weight = next++;
  if (static_cast<int>(node.numOperands()) > next) o.total = next;
  return o;
}

/// The spec with the divisor a given total replaces.
CrossEntropySpec withTotal(CrossEntropySpec spec, const CrossEntropyOperands& o,
                           absl::Span<const TensorView> in) {
  if (o.total >= 0) spec.divisor = static_cast<double>(*in[static_cast<size_t>(o.total)].f32());
  return spec;
}

const float* weightOf(const CrossEntropyOperands& o, absl::Span<const TensorView> in) {
  return o.weight >= 0 ? in[static_cast<size_t>(o.weight)].f32() : nullptr;
}

// Both are the cross-entropy core's loops (cross_entropy_core.h: double sums of the
// max-shifted log-sum-exp), with label_smoothing = 0, no weights and classes on the last
// axis the plain loss's exact bits.
class SoftmaxCrossEntropyKernel final : public CpuKernel {
 public:
  SoftmaxCrossEntropyKernel(const CrossEntropySpec& spec, CrossEntropyOperands operands)
      : spec_(spec), operands_(operands) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    *out[0].f32() = crossEntropyForward(withTotal(spec_, operands_, in), in[0].f32(), in[1].i32(),
                                        weightOf(operands_, in));
  }

 private:
  CrossEntropySpec spec_;
  CrossEntropyOperands operands_;
};

class SoftmaxCrossEntropyBackwardKernel final : public CpuKernel {
 public:
  SoftmaxCrossEntropyBackwardKernel(const CrossEntropySpec& spec, CrossEntropyOperands operands)
      : spec_(spec), operands_(operands) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    crossEntropyBackward(withTotal(spec_, operands_, in), in[0].f32(), in[1].i32(), *in[2].f32(),
                         out[0].f32(), weightOf(operands_, in));
  }

 private:
  CrossEntropySpec spec_;
  CrossEntropyOperands operands_;
};

/// target_weight_sum over labels of any shape, with or without class weights.
class TargetWeightSumKernel final : public CpuKernel {
 public:
  explicit TargetWeightSumKernel(int64_t ignore_index) : ignore_index_(ignore_index) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const bool weighted = in.size() > 1;
    *out[0].f32() = targetWeightSum(in[0].i32(), in[0].numElements(), ignore_index_,
                                    weighted ? in[1].f32() : nullptr, weighted ? in[1].dim(0) : 0);
  }

 private:
  int64_t ignore_index_;
};

/// PyTorch's argmax: the first maximum, a NaN counting as the largest (the first NaN).
int64_t argMax(const float* row, int64_t classes) {
  int64_t best = 0;
  for (int64_t j = 1; j < classes; ++j) {
    if (row[best] != row[best]) break;  // a NaN: nothing after it wins
    if (row[j] > row[best] || row[j] != row[j]) best = j;
  }
  return best;
}

class AccuracyKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* logits = in[0].f32();
    const int32_t* labels = in[1].i32();
    int64_t rows = in[0].dim(0), classes = in[0].dim(1);
    int32_t correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[r] < 0) continue;
      correct += argMax(logits + r * classes, classes) == labels[r] ? 1 : 0;
    }
    *out[0].i32() = correct;
  }
};

}  // namespace

KernelOr makeSoftmaxCrossEntropyKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node, ir::attr::axis(init.node)); !s.ok()) return s;
  return std::make_unique<SoftmaxCrossEntropyKernel>(specOf(init.node), operandsOf(init.node, 2));
}

KernelOr makeSoftmaxCrossEntropyBackwardKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node, ir::attr::axis(init.node)); !s.ok()) return s;
  return std::make_unique<SoftmaxCrossEntropyBackwardKernel>(specOf(init.node),
                                                             operandsOf(init.node, 3));
}

KernelOr makeTargetWeightSumKernel(const KernelInit& init) {
  return std::make_unique<TargetWeightSumKernel>(ir::attr::ignore_index(init.node));
}

KernelOr makeAccuracyKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node); !s.ok()) return s;
  return std::make_unique<AccuracyKernel>();
}

}  // namespace tandem::backend::cpu
