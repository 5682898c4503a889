// Elementwise ops: the unary float ops (relu, ...) with their backward ops, clip, add, cast
// and dropout. add's gradient is the identity, so it needs no op; cast's is the cast back;
// dropout's is dropout of dy with the same counters.
//
// The ops of class unary_elementwise (ir/ops.td) share one pair of rules: y = f(x) keeps
// x's type; its gradient is the backward op the spec made with it, dx = f'(dy, v) of v = y
// (relu: the output says where x > 0) or v = x as `grad reads` says, which also keeps the
// type. So a new one needs no line here.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::StatusOr<Types> inferUnary(const Node& n) {  // x
  return Types{typeOf(n, 0)};
}

absl::StatusOr<Types> inferUnaryBackward(const Node& n) {  // dy, y or x
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  return Types{typeOf(n, 1)};
}

// The backward op and what it reads come from the spec's pairing (`grad reads`).
absl::Status gradUnary(GradContext& c) {
  const Node& n = c.node();
  const GradPair& pair = *opInfo(n.op()).grad_pair;
  Value* v = pair.reads == GradReads::kOutput ? n.result() : n.operand(0);
  auto dx = c.emit(NodeSpec{
      .op = pair.backward, .operands = {c.resultGrad(0), v}, .names = {gradName(n.operand(0))}});
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
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

DType dtypeOf(CastType t) {
  switch (t) {
    case CastType::kBf16:
      return DType::kBF16;
    case CastType::kI32:
      return DType::kI32;
    default:
      return DType::kF32;
  }
}

// Floats cast among themselves; i64 (ids, labels) casts to i32 only, and i32 comes only
// from i64: an integer never turns into a float, nor a float into an index.
absl::StatusOr<Types> inferCast(const Node& n) {
  const DType to = dtypeOf(CastView(n).dtype());
  const DType from = typeOf(n, 0).dtype;
  if (to == from)
    return fail(absl::StrCat(describeOperand(n, 0), " is already ", dtypeName(to),
                             "; a cast must change the dtype"));
  if ((from == DType::kI64) != (to == DType::kI32))
    return fail(absl::StrCat("cannot cast ", describeOperand(n, 0), " to ", dtypeName(to),
                             ": i64 casts to i32 only, and floats among f32 and bf16"));
  return Types{TensorType{to, typeOf(n, 0).shape}};
}

absl::Status gradCast(GradContext& c) {
  const Node& n = c.node();
  auto back = parseCastType(dtypeName(n.operand(0)->type().dtype));
  if (!back)
    return fail(absl::StrCat("cannot cast back to ", dtypeName(n.operand(0)->type().dtype)));
  auto dx = c.emit(
      CastArgs{.x = c.resultGrad(0), .dtype = *back}.spec({.names = {gradName(n.operand(0))}}));
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

absl::StatusOr<Types> inferDropout(const Node& n) {  // x, step
  RETURN_IF_ERROR(expectStepOperand(n, 1));
  // The Philox counter has a 32-bit word for the row and one for the element's group of 8.
  const TensorType& x = typeOf(n, 0);
  const int64_t rows = x.rank() == 0 ? 1 : x.shape[0];
  const int64_t per_row = rows == 0 ? 0 : x.numElements() / rows;
  const int64_t offset = DropoutView(n).sample_offset();
  if (offset > (int64_t{1} << 32) - rows || per_row > (int64_t{1} << 35))
    return fail(absl::StrCat(describeOperand(n, 0), " from row sample_offset=", offset,
                             " is past the mask's counter (rows below 2^32, at most 2^35 "
                             "elements a row)"));
  return Types{typeOf(n, 0)};
}

// The backward draws the forward's mask again from the same counters (dropout of dy with
// the same attributes and step) instead of reading a saved one: ten Philox rounds per eight
// elements cost less than writing and reading back a mask, nothing stays alive from the
// forward to the backward (plan-memory's peak), and replicate gives the copy the same
// sample_offset, so the gradient too is the same whatever the split.
absl::Status gradDropout(GradContext& c) {
  const DropoutView v(c.node());
  if (!c.needsGrad(DropoutView::kX)) return absl::OkStatus();
  ASSIGN_OR_RETURN(Node * dx, c.emit(DropoutArgs{.x = c.resultGrad(0),
                                                 .step = v.step(),
                                                 .p = v.p(),
                                                 .mask_id = v.mask_id(),
                                                 .sample_offset = v.sample_offset()}
                                         .spec({.names = {gradName(v.x())}})));
  c.addOperandGrad(0, dx->result());
  return absl::OkStatus();
}

// clip's gradient: clip_backward(dy, x) with the same bounds.
absl::Status gradClip(GradContext& c) {
  const ClipView v(c.node());
  ASSIGN_OR_RETURN(
      Node * dx,
      c.emit(
          ClipBackwardArgs{.dy = c.resultGrad(0), .x = v.x(), .min = v.min(), .max = v.max()}.spec(
              {.names = {gradName(v.x())}})));
  c.addOperandGrad(0, dx->result());
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kClipRules{.infer = inferUnary, .grad = gradClip};
extern const OpRules kClipBackwardRules{.infer = inferUnaryBackward};
extern const OpRules kCastRules{.infer = inferCast, .grad = gradCast};
extern const OpRules kUnaryElementwiseRules{.infer = inferUnary, .grad = gradUnary};
extern const OpRules kUnaryElementwiseBackwardRules{.infer = inferUnaryBackward};
extern const OpRules kAddRules{.infer = inferAdd, .grad = gradAdd};
extern const OpRules kDropoutRules{.infer = inferDropout, .grad = gradDropout};

}  // namespace tandem::ir
