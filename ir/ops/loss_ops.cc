// softmax_cross_entropy (with its backward op), target_weight_sum and accuracy.

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

/// softmax_cross_entropy and its backward op: logits of rank >= 2 with the classes on
/// `axis`, labels of the logits' shape less that axis, then (`extra` operands after the
/// labels: the backward's dloss) the class weights f32[C] when weighted and the optional
/// total f32[], which replaces the divisor of a mean.
absl::Status checkCrossEntropy(const Node& n, size_t extra) {
  const TensorType& logits = typeOf(n, 0);
  const int64_t axis = attr::axis(n);
  if (logits.rank() < 2 || axis >= logits.rank())
    return fail(absl::StrCat(describeOperand(n, 0),
                             " must have rank >= 2 with the classes on axis ", axis,
                             " (a batch axis first)"));
  Shape label_shape = logits.shape;
  label_shape.erase(label_shape.begin() + axis);
  if (absl::Status s = expectType(n, 1, TensorType{DType::kI32, label_shape},
                                  absl::StrCat("one class index per target: the logits' shape "
                                               "less the class axis ",
                                               axis));
      !s.ok())
    return s;
  const bool weighted = attr::weighted(n);
  const size_t required = 2 + extra + (weighted ? 1 : 0);
  if (n.numOperands() < required || n.numOperands() > required + 1)
    return fail(absl::StrCat("expected ", required, " or ", required + 1, " operands (",
                             weighted ? "weighted=true: the class weights, then" : "",
                             " an optional total), got ", n.numOperands()));
  const int64_t classes = logits.shape[static_cast<size_t>(axis)];
  if (weighted)
    if (absl::Status s =
            expectType(n, 2 + extra, TensorType{DType::kF32, {classes}}, "one weight per class");
        !s.ok())
      return s;
  const Reduction reduction = attr::reduction(n);
  if (absl::Status s = checkReduction(reduction, attr::divisor(n)); !s.ok()) return s;
  if (n.numOperands() == required) return absl::OkStatus();
  if (reduction != Reduction::kMean || attr::divisor(n) != 1)
    return fail("a total (what a mean divides by) needs reduction=mean and divisor=1");
  return expectType(n, required, TensorType{DType::kF32, {}},
                    "the global sum of the counted targets' weights");
}

absl::StatusOr<Types> inferSoftmaxCrossEntropy(const Node& n) {
  if (absl::Status s = checkCrossEntropy(n, 0); !s.ok()) return s;
  return Types{TensorType{DType::kF32, {}}};
}

absl::StatusOr<Types> inferSoftmaxCrossEntropyBackward(const Node& n) {
  if (n.numOperands() < 3) return fail("expected logits, labels and dloss");
  if (absl::Status s = expectType(n, 2, TensorType{DType::kF32, {}}, "the loss gradient"); !s.ok())
    return s;
  if (absl::Status s = checkCrossEntropy(n, 1); !s.ok()) return s;
  return Types{typeOf(n, 0)};
}

/// The backward op takes the forward's operands after dloss and its attributes (the spec
/// declares them in the same order).
absl::Status gradSoftmaxCrossEntropy(GradContext& c) {
  const Node& n = c.node();
  for (size_t i = 2; i < n.numOperands(); ++i)
    if (c.needsGrad(i))
      return fail(absl::StrCat(describeOperand(n, i),
                               " depends on a trained weight, but the class weights and the "
                               "total get no gradient"));
  std::vector<Value*> operands{n.operand(0), n.operand(1), c.resultGrad(0)};
  for (size_t i = 2; i < n.numOperands(); ++i) operands.push_back(n.operand(i));
  auto dx = c.emit(NodeSpec{.op = Op::kSoftmaxCrossEntropyBackward,
                            .operands = std::move(operands),
                            .attr_values = n.attrs(),
                            .names = {gradName(n.operand(0))}});
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

/// labels i32 of any shape (a batch axis first), the class weights f32[C].
absl::StatusOr<Types> inferTargetWeightSum(const Node& n) {
  if (typeOf(n, 0).rank() < 1)
    return fail(absl::StrCat(describeOperand(n, 0), " must have rank >= 1 (a batch axis)"));
  if (n.numOperands() > 1 && typeOf(n, 1).rank() != 1)
    return fail(absl::StrCat(describeOperand(n, 1), " must have rank 1 (one weight per class)"));
  return Types{TensorType{DType::kF32, {}}};
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
extern const OpRules kTargetWeightSumRules{.infer = inferTargetWeightSum};

}  // namespace tandem::ir
