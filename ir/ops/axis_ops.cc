// The ops over one axis of a tensor: softmax and log_softmax with their backward ops.
// The axis counts from the end when negative, as in PyTorch; one outside the operand's
// rank is an error naming it.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::Status checkAxis(const Node& n, size_t operand) {
  const int64_t axis = n.intAttr("axis"), rank = typeOf(n, operand).rank();
  if (axis >= -rank && axis < rank) return absl::OkStatus();
  return fail(absl::StrCat("axis=", axis, " is outside ", describeOperand(n, operand), " (rank ",
                           rank, ": -", rank, " to ", rank - 1, ")"));
}

absl::StatusOr<Types> inferSoftmax(const Node& n) {  // x
  RETURN_IF_ERROR(expectFloat(n, 0));
  RETURN_IF_ERROR(checkAxis(n, 0));
  return Types{typeOf(n, 0)};
}

absl::StatusOr<Types> inferSoftmaxBackward(const Node& n) {  // dy, y
  RETURN_IF_ERROR(expectFloat(n, 1));
  RETURN_IF_ERROR(checkAxis(n, 1));
  RETURN_IF_ERROR(expectSameType(n, 0, 1));
  return Types{typeOf(n, 1)};
}

/// Both backward ops read the forward's output (oneDNN's and the CUDA rows' convention).
template <Op kBackward>
absl::Status gradSoftmax(GradContext& c) {
  const Node& n = c.node();
  ASSIGN_OR_RETURN(Node * dx, c.emit(kBackward, {c.resultGrad(0), n.result()},
                                     {{"axis", n.intAttr("axis")}}, {gradName(n.operand(0))}));
  c.addOperandGrad(0, dx->result());
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kSoftmaxRules{.infer = inferSoftmax,
                                   .grad = gradSoftmax<Op::kSoftmaxBackward>};
extern const OpRules kLogSoftmaxRules{.infer = inferSoftmax,
                                      .grad = gradSoftmax<Op::kLogSoftmaxBackward>};
extern const OpRules kSoftmaxBackwardRules{.infer = inferSoftmaxBackward};
extern const OpRules kLogSoftmaxBackwardRules{.infer = inferSoftmaxBackward};

}  // namespace tandem::ir
