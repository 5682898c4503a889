// softmax_cross_entropy (label smoothing included), its backward op and accuracy: plain
// loops over the [N,C] logits. C is small (10 classes) and N a per-device batch, so these
// cost nothing next to the layers; they are written for exactness (max-subtracted
// log-sum-exp, double sums).
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

absl::Status checkLogits(const ir::Node& node) {
  const ir::TensorType& t = node.operand(0)->type();
  if (t.dtype != ir::DType::kF32)
    return absl::UnimplementedError(absl::StrCat(
        node.describe(), ": the CPU kernel supports f32 logits, not ", ir::dtypeName(t.dtype)));
  // Every row needs a maximum.
  if (t.shape[1] < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": the logits have no classes"));
  return absl::OkStatus();
}

/// The loss's rows, classes, smoothing and what a reduction divides the summed loss by:
/// `divisor` (the global batch) for mean.
CrossEntropySpec specOf(const ir::Node& node) {
  const ir::TensorType& logits = node.operand(0)->type();
  return CrossEntropySpec{.rows = logits.shape[0],
                          .classes = logits.shape[1],
                          .smoothing = ir::attr::label_smoothing(node),
                          .divisor = ir::attr::reduction(node) == ir::Reduction::kMean
                                         ? static_cast<double>(ir::attr::divisor(node))
                                         : 1.0};
}

// Both are the cross-entropy core's loops (cross_entropy_core.h: double sums of the
// max-shifted log-sum-exp), with label_smoothing = 0 the plain loss's exact bits.
class SoftmaxCrossEntropyKernel final : public CpuKernel {
 public:
  explicit SoftmaxCrossEntropyKernel(const CrossEntropySpec& spec) : spec_(spec) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    *out[0].f32() = crossEntropyForward(spec_, in[0].f32(), in[1].i32());
  }

 private:
  CrossEntropySpec spec_;
};

class SoftmaxCrossEntropyBackwardKernel final : public CpuKernel {
 public:
  explicit SoftmaxCrossEntropyBackwardKernel(const CrossEntropySpec& spec) : spec_(spec) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    crossEntropyBackward(spec_, in[0].f32(), in[1].i32(), *in[2].f32(), out[0].f32());
  }

 private:
  CrossEntropySpec spec_;
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
  if (absl::Status s = checkLogits(init.node); !s.ok()) return s;
  return std::make_unique<SoftmaxCrossEntropyKernel>(specOf(init.node));
}

KernelOr makeSoftmaxCrossEntropyBackwardKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node); !s.ok()) return s;
  return std::make_unique<SoftmaxCrossEntropyBackwardKernel>(specOf(init.node));
}

KernelOr makeAccuracyKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node); !s.ok()) return s;
  return std::make_unique<AccuracyKernel>();
}

}  // namespace tandem::backend::cpu
