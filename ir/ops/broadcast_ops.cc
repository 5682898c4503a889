// scale, and the broadcasting add_bcast and mul_bcast (numpy's rules).
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

/// numpy's broadcast of a's and b's shapes: aligned from the last axis, each pair equal or
/// one of them 1 (a missing axis counts as 1).
absl::StatusOr<Shape> broadcastShape(const Node& n) {
  const Shape &a = typeOf(n, 0).shape, &b = typeOf(n, 1).shape;
  const size_t rank = std::max(a.size(), b.size());
  Shape y(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return fail(absl::StrCat(describeOperand(n, 0), " and ", describeOperand(n, 1),
                               " do not broadcast: axis ", static_cast<int64_t>(i - rank), " is ",
                               da, " and ", db, " (numpy's rules: equal, or one of them 1)"));
    y[i] = da == 1 ? db : da;
  }
  return y;
}

absl::StatusOr<Types> inferBroadcastBinary(const Node& n) {  // a, b
  ASSIGN_OR_RETURN(Shape y, broadcastShape(n));
  const bool low = typeOf(n, 0).dtype == DType::kBF16 || typeOf(n, 1).dtype == DType::kBF16;
  return Types{TensorType{low ? DType::kBF16 : DType::kF32, y}};
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

}  // namespace

extern const OpRules kScaleRules{.infer = inferScale, .grad = gradScale};
extern const OpRules kAddBcastRules{.infer = inferBroadcastBinary, .grad = gradAddBcast};
extern const OpRules kMulBcastRules{.infer = inferBroadcastBinary, .grad = gradMulBcast};

}  // namespace tandem::ir
