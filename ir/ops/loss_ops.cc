// softmax_cross_entropy (with its backward op) and accuracy.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// logits [N,K], labels [N] (their dtypes, f32 and i32, are the spec's: losses and
/// accuracy are computed in f32, and mixed precision casts bf16 logits up).
absl::Status checkLogitsLabels(const Node& n) {
  if (absl::Status s = expectRank(n, 0, 2, "N, classes"); !s.ok()) return s;
  return expectType(n, 1, TensorType{DType::kI32, {typeOf(n, 0).shape[0]}},
                    "one class index per row of the logits");
}

absl::Status checkReduction(Reduction reduction, int64_t divisor) {
  if (reduction == Reduction::kSum && divisor != 1)
    return fail("divisor must be 1 when reduction=sum");
  return absl::OkStatus();
}

absl::StatusOr<Types> inferSoftmaxCrossEntropy(const Node& n) {
  if (absl::Status s = checkLogitsLabels(n); !s.ok()) return s;
  const SoftmaxCrossEntropyView v(n);
  if (absl::Status s = checkReduction(v.reduction(), v.divisor()); !s.ok()) return s;
  return Types{TensorType{DType::kF32, {}}};
}

absl::StatusOr<Types> inferSoftmaxCrossEntropyBackward(const Node& n) {
  if (absl::Status s = checkLogitsLabels(n); !s.ok()) return s;
  const SoftmaxCrossEntropyBackwardView v(n);
  if (absl::Status s = checkReduction(v.reduction(), v.divisor()); !s.ok()) return s;
  if (absl::Status s = expectType(n, 2, TensorType{DType::kF32, {}}, "the loss gradient"); !s.ok())
    return s;
  return Types{typeOf(n, 0)};
}

absl::Status gradSoftmaxCrossEntropy(GradContext& c) {
  const SoftmaxCrossEntropyView v(c.node());
  auto dx = c.emit(SoftmaxCrossEntropyBackwardArgs{.logits = v.logits(),
                                                   .labels = v.labels(),
                                                   .dloss = c.resultGrad(0),
                                                   .reduction = v.reduction(),
                                                   .divisor = v.divisor(),
                                                   .label_smoothing = v.label_smoothing()}
                       .spec({.names = {gradName(v.logits())}}));
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

absl::StatusOr<Types> inferAccuracy(const Node& n) {
  if (absl::Status s = checkLogitsLabels(n); !s.ok()) return s;
  return Types{TensorType{DType::kI32, {}}};
}

}  // namespace

extern const OpRules kSoftmaxCrossEntropyRules{.infer = inferSoftmaxCrossEntropy,
                                               .grad = gradSoftmaxCrossEntropy};
extern const OpRules kSoftmaxCrossEntropyBackwardRules{.infer = inferSoftmaxCrossEntropyBackward};
extern const OpRules kAccuracyRules{.infer = inferAccuracy};

}  // namespace tandem::ir
