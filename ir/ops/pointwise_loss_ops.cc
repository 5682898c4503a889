// The pointwise losses (class pointwise_loss: mse_loss, l1_loss, smooth_l1_loss,
// bce_with_logits) and their backward ops (class pointwise_loss_backward): one shape rule
// and one gradient rule for the family.

#include "absl/strings/str_cat.h"
#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// The backward op of a pointwise loss (the spec declares them side by side).
Op pointwiseLossBackwardOf(Op op) {
  switch (op) {
    case Op::kMseLoss:
      return Op::kMseLossBackward;
    case Op::kL1Loss:
      return Op::kL1LossBackward;
    case Op::kSmoothL1Loss:
      return Op::kSmoothL1LossBackward;
    case Op::kBceWithLogits:
      return Op::kBceWithLogitsBackward;
    default:
      return Op::kInput;  // not a pointwise loss: the rule refuses it
  }
}

/// x and target of one shape (x [N, ...]); pos_weight, when given (operand `pos`), the
/// shape of x's trailing axes, broadcast over the leading ones.
absl::Status checkPointwiseOperands(const Node& n, size_t pos) {
  if (typeOf(n, 0).rank() < 1)
    return fail(absl::StrCat(describeOperand(n, 0), " must have rank >= 1 (a batch axis)"));
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  if (attr::reduction(n) == Reduction::kSum && attr::divisor(n) != 1)
    return fail("divisor must be 1 when reduction=sum");
  if (n.numOperands() <= pos) return absl::OkStatus();
  const Shape& x = typeOf(n, 0).shape;
  const Shape& p = typeOf(n, pos).shape;
  const bool suffix =
      !p.empty() && p.size() <= x.size() && std::equal(p.begin(), p.end(), x.end() - p.size());
  if (!suffix)
    return fail(absl::StrCat(describeOperand(n, pos),
                             " must have the shape of x's trailing axes (it broadcasts over the "
                             "leading ones, as nn.BCEWithLogitsLoss's pos_weight)"));
  return absl::OkStatus();
}

absl::StatusOr<Types> inferPointwiseLoss(const Node& n) {
  if (absl::Status s = checkPointwiseOperands(n, 2); !s.ok()) return s;
  return Types{TensorType{DType::kF32, {}}};
}

absl::StatusOr<Types> inferPointwiseLossBackward(const Node& n) {
  if (absl::Status s = checkPointwiseOperands(n, 3); !s.ok()) return s;
  if (absl::Status s = expectType(n, 2, TensorType{DType::kF32, {}}, "the loss gradient"); !s.ok())
    return s;
  return Types{typeOf(n, 0)};
}

/// d loss / d x by the op's backward op, with the forward's attributes (the classes
/// declare them alike, in the same order). The target and pos_weight are data: a graph
/// whose target depends on a trained weight (distillation) is refused rather than
/// silently given no gradient.
absl::Status gradPointwiseLoss(GradContext& c) {
  const Node& n = c.node();
  const Op back = pointwiseLossBackwardOf(n.op());
  if (back == Op::kInput) return fail(absl::StrCat("op ", n.opName(), " is no pointwise loss"));
  for (size_t i = 1; i < n.numOperands(); ++i)
    if (c.needsGrad(i))
      return fail(absl::StrCat(describeOperand(n, i),
                               " depends on a trained weight, but a loss's target gets no "
                               "gradient"));
  if (!c.needsGrad(0)) return absl::OkStatus();
  std::vector<Value*> operands{n.operand(0), n.operand(1), c.resultGrad(0)};
  if (n.numOperands() > 2) operands.push_back(n.operand(2));  // pos_weight
  auto dx = c.emit(NodeSpec{.op = back,
                            .operands = std::move(operands),
                            .attr_values = n.attrs(),
                            .names = {gradName(n.operand(0))}});
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kPointwiseLossRules{.infer = inferPointwiseLoss, .grad = gradPointwiseLoss};
extern const OpRules kPointwiseLossBackwardRules{.infer = inferPointwiseLossBackward};

}  // namespace tandem::ir
