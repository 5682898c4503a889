// Elementwise ops: the unary float ops (relu, ...) with their backward ops, add and cast.
// add's gradient is the identity, so it needs no op; cast's is the cast back.
//
// A unary float op y = f(x) keeps x's type; its gradient is one backward op dx = f'(dy, v)
// of v = y (relu: the output says where x > 0) or v = x, which also keeps the type. So a
// new one is two lines below: its rules from unaryRules and its backward op's from
// kUnaryBackwardRules.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::StatusOr<Types> inferUnary(const Node& n) {  // x
  if (absl::Status s = expectFloat(n, 0); !s.ok()) return s;
  return Types{typeOf(n, 0)};
}

absl::StatusOr<Types> inferUnaryBackward(const Node& n) {  // dy, y or x
  if (absl::Status s = expectFloat(n, 1); !s.ok()) return s;
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  return Types{typeOf(n, 1)};
}

/// Which value a unary op's backward op reads beside dy.
enum class Reads { kOutput, kInput };

template <Op kBackward, Reads kReads>
absl::Status gradUnary(GradContext& c) {
  const Node& n = c.node();
  Value* v = kReads == Reads::kOutput ? n.result() : n.operand(0);
  auto dx = c.emit(NodeSpec{
      .op = kBackward, .operands = {c.resultGrad(0), v}, .names = {gradName(n.operand(0))}});
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

/// The rules of a unary float op whose gradient is `kBackward`(dy, output or input).
template <Op kBackward, Reads kReads>
constexpr OpRules unaryRules() {
  return OpRules{.infer = inferUnary, .grad = gradUnary<kBackward, kReads>};
}
constexpr OpRules kUnaryBackwardRules{.infer = inferUnaryBackward};

absl::StatusOr<Types> inferAdd(const Node& n) {
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  return Types{typeOf(n, 0)};
}

absl::Status gradAdd(GradContext& c) {
  for (size_t i = 0; i < 2; ++i)
    if (c.needsGrad(i)) c.addOperandGrad(i, c.resultGrad(0));
  return absl::OkStatus();
}

DType dtypeOf(FloatType t) { return t == FloatType::kBf16 ? DType::kBF16 : DType::kF32; }

absl::StatusOr<Types> inferCast(const Node& n) {
  if (absl::Status s = expectFloat(n, 0); !s.ok()) return s;
  const DType to = dtypeOf(CastView(n).dtype());
  if (to == typeOf(n, 0).dtype)
    return fail(absl::StrCat(describeOperand(n, 0), " is already ", dtypeName(to),
                             "; a cast must change the dtype"));
  return Types{TensorType{to, typeOf(n, 0).shape}};
}

absl::Status gradCast(GradContext& c) {
  const Node& n = c.node();
  auto back = parseFloatType(dtypeName(n.operand(0)->type().dtype));
  if (!back)
    return fail(absl::StrCat("cannot cast back to ", dtypeName(n.operand(0)->type().dtype)));
  auto dx = c.emit(
      CastArgs{.x = c.resultGrad(0), .dtype = *back}.spec({.names = {gradName(n.operand(0))}}));
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kCastRules{.infer = inferCast, .grad = gradCast};
extern const OpRules kReluRules = unaryRules<Op::kReluBackward, Reads::kOutput>();
extern const OpRules kReluBackwardRules = kUnaryBackwardRules;
extern const OpRules kSigmoidRules = unaryRules<Op::kSigmoidBackward, Reads::kOutput>();
extern const OpRules kSigmoidBackwardRules = kUnaryBackwardRules;
extern const OpRules kGeluRules = unaryRules<Op::kGeluBackward, Reads::kInput>();
extern const OpRules kGeluBackwardRules = kUnaryBackwardRules;
extern const OpRules kGeluTanhRules = unaryRules<Op::kGeluTanhBackward, Reads::kInput>();
extern const OpRules kGeluTanhBackwardRules = kUnaryBackwardRules;
extern const OpRules kTanhRules = unaryRules<Op::kTanhBackward, Reads::kOutput>();
extern const OpRules kTanhBackwardRules = kUnaryBackwardRules;
extern const OpRules kAddRules{.infer = inferAdd, .grad = gradAdd};

}  // namespace tandem::ir
