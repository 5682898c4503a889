// linear (fully connected) and its backward ops.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::Status checkMatrices(const Node& n, std::initializer_list<size_t> idx) {
  for (size_t i : idx)
    if (absl::Status s = expectRank(n, i, 2, "rows, columns"); !s.ok()) return s;
  return absl::OkStatus();
}

absl::StatusOr<Types> inferLinear(const Node& n) {  // x[N,I], w[O,I], b[O]
  if (absl::Status s = checkMatrices(n, {0, 1}); !s.ok()) return s;
  const TensorType &x = typeOf(n, 0), &w = typeOf(n, 1);
  if (absl::Status s = expectWeightDType(n, 1, x.dtype); !s.ok()) return s;
  if (x.shape[1] != w.shape[1])
    return fail(absl::StrCat("the input has ", x.shape[1], " features but the weight ",
                             describeOperand(n, 1), " expects ", w.shape[1]));
  if (n.numOperands() > 2)
    if (absl::Status s = expectType(n, 2, TensorType{w.dtype, {w.shape[0]}}, "one per output");
        !s.ok())
      return s;
  return Types{TensorType{x.dtype, {x.shape[0], w.shape[0]}}};
}

absl::StatusOr<Types> inferLinearBackwardData(const Node& n) {  // dy[N,O], w[O,I]
  if (absl::Status s = checkMatrices(n, {0, 1}); !s.ok()) return s;
  const TensorType &dy = typeOf(n, 0), &w = typeOf(n, 1);
  if (absl::Status s = expectWeightDType(n, 1, dy.dtype); !s.ok()) return s;
  if (dy.shape[1] != w.shape[0])
    return fail(absl::StrCat(describeOperand(n, 0), " must have ", w.shape[0], " columns"));
  return Types{TensorType{dy.dtype, {dy.shape[0], w.shape[1]}}};
}

absl::StatusOr<Types> inferLinearBackwardWeight(const Node& n) {  // dy[N,O], x[N,I]
  if (absl::Status s = checkMatrices(n, {0, 1}); !s.ok()) return s;
  const TensorType &dy = typeOf(n, 0), &x = typeOf(n, 1);
  if (absl::Status s = expectSameDType(n, 0, 1); !s.ok()) return s;
  if (dy.shape[0] != x.shape[0])
    return fail(absl::StrCat(describeOperand(n, 0), " and ", describeOperand(n, 1),
                             " must have the same number of rows"));
  Types out{TensorType{dy.dtype, {dy.shape[1], x.shape[1]}}};
  if (LinearBackwardWeightView(n).bias()) out.push_back(TensorType{dy.dtype, {dy.shape[1]}});
  return out;
}

absl::Status gradLinear(GradContext& c) {
  const Node& n = c.node();
  Value *dy = c.resultGrad(0), *x = n.operand(0), *w = n.operand(1);
  if (c.needsGrad(0)) {
    auto dx = c.emit(LinearBackwardDataArgs{.dy = dy, .w = w}.spec({.names = {gradName(x)}}));
    if (!dx.ok()) return dx.status();
    c.addOperandGrad(0, (*dx)->result());
  }
  bool bias = n.numOperands() > 2;
  if (c.needsGrad(1) || (bias && c.needsGrad(2))) {
    std::vector<std::string> names{gradName(w)};
    if (bias) names.push_back(gradName(n.operand(2)));
    auto dw =
        c.emit(LinearBackwardWeightArgs{.dy = dy, .x = x, .bias = bias}.spec({.names = names}));
    if (!dw.ok()) return dw.status();
    if (c.needsGrad(1)) c.addOperandGrad(1, (*dw)->result(0));
    if (bias && c.needsGrad(2)) c.addOperandGrad(2, (*dw)->result(1));
  }
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kLinearRules{.infer = inferLinear, .grad = gradLinear};
extern const OpRules kLinearBackwardDataRules{.infer = inferLinearBackwardData};
extern const OpRules kLinearBackwardWeightRules{.infer = inferLinearBackwardWeight};

}  // namespace tandem::ir
