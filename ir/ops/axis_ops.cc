// The ops over one axis of a tensor: softmax and log_softmax, sum and mean, concat_axis and
// slice_axis, with their backward ops. The axis counts from the end when negative, as in
// PyTorch; one outside the operand's rank is an error naming it.
//
// Under replicate the shape rules run again on each device's share of the batch, after
// autodiff: the attributes here are axes and offsets along them, and the backward ops read
// the forward's input for its shape, so none holds a batch size. (A slice or concat along
// the batch axis itself does depend on the split; its rule refuses a share it does not fit.)

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/broadcast_rules.h"
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
  RETURN_IF_ERROR(checkAxis(n, 0));
  return Types{typeOf(n, 0)};
}

absl::StatusOr<Types> inferSoftmaxBackward(const Node& n) {  // dy, y
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

/// The axis attribute of `n` as an index of operand `operand`'s shape.
absl::StatusOr<size_t> axisOf(const Node& n, size_t operand) {
  RETURN_IF_ERROR(checkAxis(n, operand));
  const int64_t axis = n.intAttr("axis");
  return static_cast<size_t>(axis < 0 ? axis + typeOf(n, operand).rank() : axis);
}

// ---- reduce_sum and reduce_mean -------------------------------------------------------

/// x's type with `axis` dropped, or kept as 1 under keepdim.
absl::StatusOr<TensorType> reducedType(const Node& n, size_t operand) {
  ASSIGN_OR_RETURN(size_t axis, axisOf(n, operand));
  TensorType t = typeOf(n, operand);
  if (n.boolAttr("keepdim"))
    t.shape[axis] = 1;
  else
    t.shape.erase(t.shape.begin() + static_cast<std::ptrdiff_t>(axis));
  return t;
}

absl::StatusOr<Types> inferReduce(const Node& n) {  // x
  ASSIGN_OR_RETURN(TensorType y, reducedType(n, 0));
  return Types{y};
}

absl::StatusOr<Types> inferReduceBackward(const Node& n) {  // dy, x
  ASSIGN_OR_RETURN(TensorType y, reducedType(n, 1));
  RETURN_IF_ERROR(expectType(n, 0, y, "the reduction's result type"));
  return Types{typeOf(n, 1)};
}

/// dx spreads dy back over the axis; the backward op reads x for the shape.
template <Op kBackward>
absl::Status gradReduce(GradContext& c) {
  const Node& n = c.node();
  ASSIGN_OR_RETURN(Node * dx,
                   c.emit(kBackward, {c.resultGrad(0), n.operand(0)},
                          {{"axis", n.intAttr("axis")}, {"keepdim", n.boolAttr("keepdim")}},
                          {gradName(n.operand(0))}));
  c.addOperandGrad(0, dx->result());
  return absl::OkStatus();
}

// ---- concat_axis and slice_axis --------------------------------------------------------

absl::StatusOr<Types> inferConcatAxis(const Node& n) {  // xs...
  if (n.numOperands() == 0) return fail("concat_axis needs at least one operand");
  ASSIGN_OR_RETURN(size_t axis, axisOf(n, 0));
  const int64_t rank = typeOf(n, 0).rank();
  bool low = false;
  Shape y(static_cast<size_t>(rank), 1);
  y[axis] = 0;
  for (size_t k = 0; k < n.numOperands(); ++k) {
    low = low || typeOf(n, k).dtype == DType::kBF16;
    const Shape& s = typeOf(n, k).shape;
    if (typeOf(n, k).rank() != rank)
      return fail(absl::StrCat(describeOperand(n, k), " must have rank ", rank, " like ",
                               describeOperand(n, 0)));
    y[axis] += s[axis];
    for (size_t i = 0; i < s.size(); ++i) {
      if (i == axis || s[i] == y[i] || s[i] == 1) continue;
      if (y[i] != 1)
        return fail(absl::StrCat(describeOperand(n, k), " has ", s[i], " on axis ", i,
                                 " where an earlier operand has ", y[i],
                                 " (off the concat axis sizes agree, or one is 1 and repeats)"));
      y[i] = s[i];
    }
  }
  return Types{TensorType{low ? DType::kBF16 : DType::kF32, y}};
}

/// Each operand's gradient is its slice of dy, summed over the axes it was repeated along.
absl::Status gradConcatAxis(GradContext& c) {
  const Node& n = c.node();
  ASSIGN_OR_RETURN(size_t axis, axisOf(n, 0));
  Value* dy = c.resultGrad(0);
  int64_t start = 0;
  for (size_t k = 0; k < n.numOperands(); ++k) {
    Value* x = n.operand(k);
    const int64_t end = start + x->type().shape[axis];
    if (c.needsGrad(k)) {
      Value* g = dy;
      if (n.numOperands() > 1) {
        ASSIGN_OR_RETURN(
            Node * slice,
            c.emit(SliceAxisArgs{
                .x = dy, .axis = static_cast<int64_t>(axis), .start = start, .end = end}
                       .spec({.names = {gradName(x) + ".slice"}})));
        g = slice->result();
      }
      ASSIGN_OR_RETURN(Value * dx, sumToShape(c, g, x->type().shape, gradName(x)));
      c.addOperandGrad(k, dx);
    }
    start = end;
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> inferSliceAxis(const Node& n) {  // x
  ASSIGN_OR_RETURN(size_t axis, axisOf(n, 0));
  const SliceAxisView v(n);
  TensorType y = typeOf(n, 0);
  if (v.start() < 0 || v.start() >= v.end() || v.end() > y.shape[axis])
    return fail(absl::StrCat("start=", v.start(), " end=", v.end(), " must satisfy 0 <= start < ",
                             "end <= ", y.shape[axis], ", the size of axis ", axis, " of ",
                             describeOperand(n, 0)));
  y.shape[axis] = v.end() - v.start();
  return Types{y};
}

absl::StatusOr<Types> inferSliceAxisBackward(const Node& n) {  // dy, x
  RETURN_IF_ERROR(expectSameDType(n, 0, 1));
  ASSIGN_OR_RETURN(size_t axis, axisOf(n, 1));
  const Shape &dy = typeOf(n, 0).shape, &x = typeOf(n, 1).shape;
  const int64_t start = SliceAxisBackwardView(n).start();
  bool fits = dy.size() == x.size() && start >= 0 && start + dy[axis] <= x[axis];
  for (size_t i = 0; fits && i < x.size(); ++i) fits = i == axis || dy[i] == x[i];
  if (!fits)
    return fail(absl::StrCat(describeOperand(n, 0), " must be a slice of ", describeOperand(n, 1),
                             " along axis ", axis, " from start=", start));
  return Types{typeOf(n, 1)};
}

absl::Status gradSliceAxis(GradContext& c) {
  const Node& n = c.node();
  const SliceAxisView v(n);
  ASSIGN_OR_RETURN(
      Node * dx, c.emit(SliceAxisBackwardArgs{
                     .dy = c.resultGrad(0), .x = n.operand(0), .axis = v.axis(), .start = v.start()}
                            .spec({.names = {gradName(n.operand(0))}})));
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
extern const OpRules kReduceSumRules{.infer = inferReduce,
                                     .grad = gradReduce<Op::kReduceSumBackward>};
extern const OpRules kReduceMeanRules{.infer = inferReduce,
                                      .grad = gradReduce<Op::kReduceMeanBackward>};
extern const OpRules kReduceSumBackwardRules{.infer = inferReduceBackward};
extern const OpRules kReduceMeanBackwardRules{.infer = inferReduceBackward};
extern const OpRules kConcatAxisRules{.infer = inferConcatAxis, .grad = gradConcatAxis};
extern const OpRules kSliceAxisRules{.infer = inferSliceAxis, .grad = gradSliceAxis};
extern const OpRules kSliceAxisBackwardRules{.infer = inferSliceAxisBackward};

}  // namespace tandem::ir
