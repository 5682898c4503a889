// scale, and the broadcasting add_bcast, mul_bcast, compare, where and mod (numpy's
// rules).
//
// Broadcasting is ops of their own rather than a wider `add` because add is fusible:
// fuse-conv-bn-relu takes it as a residual join and the layout rules of both backends
// (backend/{cpu,cuda}/layout_plan.cc) keep its operands blocked (nChw16c, NHWC) like its
// result, all of which read both operands at the result's shape. Same-shape add keeps its
// rules and kernels; a broadcast operand never reaches them.
//
// The gradient of a broadcast operand sums over the axes it was repeated along
// (sumToShape, shared with concat_axis): reduce_sum nodes whose attributes are axes, never
// sizes, so replicate's per-device shapes re-infer through them.

#include <algorithm>

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/broadcast_rules.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {

absl::StatusOr<Value*> sumToShape(GradContext& c, Value* g, const Shape& target,
                                  const std::string& name) {
  const Shape& s = g->type().shape;
  if (s.size() < target.size())
    return absl::InternalError(absl::StrCat("sumToShape: ", toString(g->type()),
                                            " has fewer axes than ",
                                            toString(TensorType{g->type().dtype, target})));
  // The axes to sum: the leading ones target lacks (dropped), then those where target is 1
  // and g is not (kept, size 1). One reduce_sum each, the last one named `name`.
  const size_t lead = s.size() - target.size();
  std::vector<std::pair<int64_t, bool>> sums;  // (axis at the time, keepdim)
  for (size_t i = 0; i < lead; ++i) sums.push_back({0, false});
  for (size_t i = 0; i < target.size(); ++i)
    if (target[i] == 1 && s[lead + i] != 1) sums.push_back({static_cast<int64_t>(i), true});
  Value* v = g;
  for (size_t k = 0; k < sums.size(); ++k) {
    const std::string n = k + 1 == sums.size() ? name : absl::StrCat(name, ".sum", k);
    ASSIGN_OR_RETURN(
        Node * sum,
        c.emit(ReduceSumArgs{.x = v, .axis = sums[k].first, .keepdim = sums[k].second}.spec(
            {.names = {n}})));
    v = sum->result();
  }
  return v;
}

namespace {
using namespace rules;

absl::StatusOr<Types> inferScale(const Node& n) {  // x
  return Types{typeOf(n, 0)};
}

absl::Status gradScale(GradContext& c) {
  const Node& n = c.node();
  ASSIGN_OR_RETURN(Node * dx,
                   c.emit(ScaleArgs{.x = c.resultGrad(0), .factor = ScaleView(n).factor()}.spec(
                       {.names = {gradName(n.operand(0))}})));
  c.addOperandGrad(0, dx->result());
  return absl::OkStatus();
}

/// numpy's broadcast of the shapes of operands `first` onwards: aligned from the last
/// axis, each axis' sizes equal or 1 (a missing axis counts as 1).
absl::StatusOr<Shape> broadcastShape(const Node& n, size_t first = 0) {
  Shape y;
  for (size_t k = first; k < n.numOperands(); ++k) {
    const Shape& x = typeOf(n, k).shape;
    if (x.size() > y.size()) y.insert(y.begin(), x.size() - y.size(), 1);
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t& d = y[y.size() - x.size() + i];
      if (x[i] != d && x[i] != 1 && d != 1) {
        const auto axis = static_cast<int64_t>(i) - static_cast<int64_t>(x.size());
        return fail(
            absl::StrCat(k == first + 1 ? describeOperand(n, first) : "the operands before it",
                         " and ", describeOperand(n, k), " do not broadcast: axis ", axis, " is ",
                         d, " and ", x[i], " (numpy's rules: equal, or one of them 1)"));
      }
      if (d == 1) d = x[i];
    }
  }
  return y;
}

/// The broadcast shape, in bf16 when an operand from `first` on is (an f32 one beside it
/// a master weight, read as it is), else f32.
absl::StatusOr<Types> inferBroadcastFrom(const Node& n, size_t first) {
  ASSIGN_OR_RETURN(Shape y, broadcastShape(n, first));
  bool low = false;
  for (size_t k = first; k < n.numOperands(); ++k) low = low || typeOf(n, k).dtype == DType::kBF16;
  return Types{TensorType{low ? DType::kBF16 : DType::kF32, y}};
}

absl::StatusOr<Types> inferBroadcastBinary(const Node& n) {  // a, b
  return inferBroadcastFrom(n, 0);
}

/// where's result is of a's and b's dtype, shaped by all three; mod_backward's of dy's.
absl::StatusOr<Types> inferWhere(const Node& n) {  // cond, a, b
  ASSIGN_OR_RETURN(Types t, inferBroadcastFrom(n, 1));
  ASSIGN_OR_RETURN(t[0].shape, broadcastShape(n));
  return t;
}

absl::StatusOr<Types> inferModBackward(const Node& n) {  // dy, a, b
  ASSIGN_OR_RETURN(Shape y, broadcastShape(n));
  return Types{TensorType{typeOf(n, 0).dtype, y}};
}

absl::Status gradAddBcast(GradContext& c) {
  const Node& n = c.node();
  for (size_t i = 0; i < 2; ++i) {
    if (!c.needsGrad(i)) continue;
    Value* x = n.operand(i);
    ASSIGN_OR_RETURN(Value * dx, sumToShape(c, c.resultGrad(0), x->type().shape, gradName(x)));
    c.addOperandGrad(i, dx);
  }
  return absl::OkStatus();
}

absl::Status gradMulBcast(GradContext& c) {
  const Node& n = c.node();
  for (size_t i = 0; i < 2; ++i) {
    if (!c.needsGrad(i)) continue;
    Value *x = n.operand(i), *other = n.operand(1 - i);
    // d a = sum over a's broadcast axes of dy * b (and the same for b); the product is the
    // gradient itself where a was not broadcast.
    const bool whole = x->type().shape == n.result()->type().shape;
    ASSIGN_OR_RETURN(Node * prod,
                     c.emit(MulBcastArgs{.a = c.resultGrad(0), .b = other}.spec(
                         {.names = {whole ? gradName(x) : gradName(x) + ".full"}})));
    ASSIGN_OR_RETURN(Value * dx, sumToShape(c, prod->result(), x->type().shape, gradName(x)));
    c.addOperandGrad(i, dx);
  }
  return absl::OkStatus();
}

/// A comparison is piecewise constant: nothing flows back through it.
absl::Status gradCompare(GradContext&) { return absl::OkStatus(); }

/// da = where(cond, dy, 0) and db = where(cond, 0, dy), each summed to its operand's shape
/// (PyTorch's where backward: a select, so an infinite dy on the other side stays out).
absl::Status gradWhere(GradContext& c) {
  const Node& n = c.node();
  if (!c.needsGrad(1) && !c.needsGrad(2)) return absl::OkStatus();
  Value* dy = c.resultGrad(0);
  ASSIGN_OR_RETURN(Node * zero, c.emit(ConstantArgs{.value = 0}.spec(
                                    {.names = {n.result()->name() + ".grad_zero"},
                                     .declared_types = {TensorType{dy->type().dtype, {}}}})));
  for (size_t i = 1; i < 3; ++i) {
    if (!c.needsGrad(i)) continue;
    Value* x = n.operand(i);
    const bool whole = x->type().shape == n.result()->type().shape;
    ASSIGN_OR_RETURN(Node * sel,
                     c.emit(WhereArgs{.cond = n.operand(0),
                                      .a = i == 1 ? dy : zero->result(),
                                      .b = i == 1 ? zero->result() : dy}
                                .spec({.names = {whole ? gradName(x) : gradName(x) + ".full"}})));
    ASSIGN_OR_RETURN(Value * dx, sumToShape(c, sel->result(), x->type().shape, gradName(x)));
    c.addOperandGrad(i, dx);
  }
  return absl::OkStatus();
}

/// da = dy summed to a's shape; db = mod_backward (-dy times the rounded quotient) summed
/// to b's.
absl::Status gradMod(GradContext& c) {
  const Node& n = c.node();
  Value *a = n.operand(0), *b = n.operand(1), *dy = c.resultGrad(0);
  if (c.needsGrad(0)) {
    ASSIGN_OR_RETURN(Value * da, sumToShape(c, dy, a->type().shape, gradName(a)));
    c.addOperandGrad(0, da);
  }
  if (c.needsGrad(1)) {
    const bool whole = b->type().shape == n.result()->type().shape;
    ASSIGN_OR_RETURN(
        Node * full,
        c.emit(ModBackwardArgs{.dy = dy, .a = a, .b = b, .fmod = ModView(n).fmod()}.spec(
            {.names = {whole ? gradName(b) : gradName(b) + ".full"}})));
    ASSIGN_OR_RETURN(Value * db, sumToShape(c, full->result(), b->type().shape, gradName(b)));
    c.addOperandGrad(1, db);
  }
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kCompareRules{.infer = inferBroadcastBinary, .grad = gradCompare};
extern const OpRules kWhereRules{.infer = inferWhere, .grad = gradWhere};
extern const OpRules kModRules{.infer = inferBroadcastBinary, .grad = gradMod};
extern const OpRules kModBackwardRules{.infer = inferModBackward};
extern const OpRules kScaleRules{.infer = inferScale, .grad = gradScale};
extern const OpRules kAddBcastRules{.infer = inferBroadcastBinary, .grad = gradAddBcast};
extern const OpRules kMulBcastRules{.infer = inferBroadcastBinary, .grad = gradMulBcast};

}  // namespace tandem::ir
