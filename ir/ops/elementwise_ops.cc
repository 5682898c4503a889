// relu, add, relu's backward op and cast. add's gradient is the identity, so it needs no op;
// cast's is the cast back.

#include "ir/grad.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::StatusOr<Types> inferRelu(const Node& n) {
  if (absl::Status s = expectFloat(n, 0); !s.ok()) return s;
  return Types{typeOf(n, 0)};
}

absl::Status gradRelu(GradContext& c) {
  const Node& n = c.node();
  auto dx = c.emit(Op::kReluBackward, {c.resultGrad(0), n.result()}, {}, {gradName(n.operand(0))});
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

absl::StatusOr<Types> inferReluBackward(const Node& n) {  // dy, y
  if (absl::Status s = expectFloat(n, 1); !s.ok()) return s;
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  return Types{typeOf(n, 1)};
}

absl::StatusOr<Types> inferAdd(const Node& n) {
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  return Types{typeOf(n, 0)};
}

absl::Status gradAdd(GradContext& c) {
  for (size_t i = 0; i < 2; ++i)
    if (c.needsGrad(i)) c.addOperandGrad(i, c.resultGrad(0));
  return absl::OkStatus();
}

absl::StatusOr<Types> inferCast(const Node& n) {
  if (absl::Status s = expectFloat(n, 0); !s.ok()) return s;
  auto to = parseDType(n.enumAttr("dtype"));
  if (!to.ok()) return to.status();
  if (*to == typeOf(n, 0).dtype)
    return fail(absl::StrCat(describeOperand(n, 0), " is already ", dtypeName(*to),
                             "; a cast must change the dtype"));
  return Types{TensorType{*to, typeOf(n, 0).shape}};
}

absl::Status gradCast(GradContext& c) {
  const Node& n = c.node();
  auto dx = c.emit(Op::kCast, {c.resultGrad(0)},
                   {{"dtype", EnumWord{std::string(dtypeName(n.operand(0)->type().dtype))}}},
                   {gradName(n.operand(0))});
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kCastRules{.infer = inferCast, .grad = gradCast};
extern const OpRules kReluRules{.infer = inferRelu, .grad = gradRelu};
extern const OpRules kReluBackwardRules{.infer = inferReluBackward};
extern const OpRules kAddRules{.infer = inferAdd, .grad = gradAdd};

}  // namespace tandem::ir
