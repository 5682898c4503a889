// softmax_cross_entropy, its backward op and accuracy: plain loops over the [N,C] logits.
// C is small (10 classes) and N a per-device batch, so these cost nothing next to the
// layers; they are written for exactness (max-subtracted log-sum-exp, double sums).
//
// Rows with a negative label are padding of a last partial batch: they add no loss, get a
// zero gradient and never count as correct. A label >= C is a bug in the data pipeline
// (the loader checks labels), so it is only asserted.

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
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

/// What a reduction divides the summed loss by: `divisor` (the global batch) for mean.
double lossScale(const ir::Node& node) {
  return ir::attr::reduction(node) == ir::Reduction::kMean
             ? static_cast<double>(ir::attr::divisor(node))
             : 1.0;
}

/// log(sum(exp(row))), shifted by the row's maximum so that exp never overflows.
double logSumExp(const float* row, int64_t classes) {
  double max = row[0];
  for (int64_t j = 1; j < classes; ++j) max = std::max(max, static_cast<double>(row[j]));
  double sum = 0;
  for (int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - max);
  return max + std::log(sum);
}

class SoftmaxCrossEntropyKernel final : public CpuKernel {
 public:
  explicit SoftmaxCrossEntropyKernel(double divisor) : divisor_(divisor) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* logits = in[0].f32();
    const int32_t* labels = in[1].i32();
    int64_t rows = in[0].dim(0), classes = in[0].dim(1);
    double loss = 0;
    for (int64_t r = 0; r < rows; ++r) {
      int32_t label = labels[r];
      if (label < 0) continue;
      assert(label < classes);
      const float* row = logits + r * classes;
      loss += logSumExp(row, classes) - static_cast<double>(row[label]);
    }
    *out[0].f32() = static_cast<float>(loss / divisor_);
  }

 private:
  double divisor_;
};

class SoftmaxCrossEntropyBackwardKernel final : public CpuKernel {
 public:
  explicit SoftmaxCrossEntropyBackwardKernel(double divisor) : divisor_(divisor) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* logits = in[0].f32();
    const int32_t* labels = in[1].i32();
    double scale = static_cast<double>(*in[2].f32()) / divisor_;
    float* dlogits = out[0].f32();
    int64_t rows = in[0].dim(0), classes = in[0].dim(1);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits + r * classes;
      float* drow = dlogits + r * classes;
      int32_t label = labels[r];
      if (label < 0) {
        for (int64_t j = 0; j < classes; ++j) drow[j] = 0.0f;
        continue;
      }
      assert(label < classes);
      double lse = logSumExp(row, classes);
      for (int64_t j = 0; j < classes; ++j) {
        double p = std::exp(static_cast<double>(row[j]) - lse);
        drow[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) * scale);
      }
    }
  }

 private:
  double divisor_;
};

class AccuracyKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* logits = in[0].f32();
    const int32_t* labels = in[1].i32();
    int64_t rows = in[0].dim(0), classes = in[0].dim(1);
    int32_t correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[r] < 0) continue;
      const float* row = logits + r * classes;
      int64_t best = 0;  // the first maximum wins a tie
      for (int64_t j = 1; j < classes; ++j)
        if (row[j] > row[best]) best = j;
      correct += best == labels[r] ? 1 : 0;
    }
    *out[0].i32() = correct;
  }
};

}  // namespace

KernelOr makeSoftmaxCrossEntropyKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node); !s.ok()) return s;
  return std::make_unique<SoftmaxCrossEntropyKernel>(lossScale(init.node));
}

KernelOr makeSoftmaxCrossEntropyBackwardKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node); !s.ok()) return s;
  return std::make_unique<SoftmaxCrossEntropyBackwardKernel>(lossScale(init.node));
}

KernelOr makeAccuracyKernel(const KernelInit& init) {
  if (absl::Status s = checkLogits(init.node); !s.ok()) return s;
  return std::make_unique<AccuracyKernel>();
}

}  // namespace tandem::backend::cpu
