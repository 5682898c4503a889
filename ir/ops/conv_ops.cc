// conv2d and its two backward ops.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/conv_rules.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
using namespace rules;

absl::StatusOr<TensorType> convOutput(const Node& n, size_t x, size_t w, const Value* bias) {
  const Hw stride = attr::stride(n), pad = attr::pad(n);
  const int64_t groups = attr::groups(n);
  for (size_t i : {x, w})  // both f32 or bf16 (the spec's dtypes, checked before the rule)
    if (absl::Status s = expectRank(n, i, 4, i == x ? "N,C,H,W" : "O,C,KH,KW"); !s.ok()) return s;
  const TensorType& xt = typeOf(n, x);
  const TensorType& wt = typeOf(n, w);
  if (absl::Status s = expectWeightDType(n, w, xt.dtype); !s.ok()) return s;
  if (wt.shape[0] % groups != 0)
    return fail(absl::StrCat("the filter ", describeOperand(n, w), " has ", wt.shape[0],
                             " output channels, which do not split into ", groups, " groups"));
  if (xt.shape[1] != wt.shape[1] * groups)
    return fail(groups == 1
                    ? absl::StrCat("the input has ", xt.shape[1], " channels but the filter ",
                                   describeOperand(n, w), " expects ", wt.shape[1])
                    : absl::StrCat("the input has ", xt.shape[1], " channels but the filter ",
                                   describeOperand(n, w), " of ", groups, " groups expects ",
                                   wt.shape[1] * groups, " (", wt.shape[1], " per group)"));
  if (bias != nullptr && bias->type() != TensorType{wt.dtype, {wt.shape[0]}})
    return fail(absl::StrCat("the bias %", bias->name(), ": ", toString(bias->type()), " must be ",
                             toString(TensorType{wt.dtype, {wt.shape[0]}}),
                             " (the filter's dtype)"));
  auto h = windowExtent(xt.shape[2], wt.shape[2], stride.h, pad.h, "height");
  if (!h.ok()) return h.status();
  auto wd = windowExtent(xt.shape[3], wt.shape[3], stride.w, pad.w, "width");
  if (!wd.ok()) return wd.status();
  return TensorType{xt.dtype, {xt.shape[0], wt.shape[0], *h, *wd}};
}

namespace {

absl::StatusOr<Types> inferConv2d(const Node& n) {
  const Conv2dView v(n);
  auto y = convOutput(n, v.kX, v.kW, v.b());
  if (!y.ok()) return y.status();
  return Types{*y};
}

absl::StatusOr<Types> inferConv2dBackwardData(const Node& n) {
  const Conv2dBackwardDataView v(n);
  auto y = convOutput(n, v.kX, v.kW, nullptr);
  if (!y.ok()) return y.status();
  if (absl::Status s = expectType(n, v.kDy, *y, "the forward output type"); !s.ok()) return s;
  return Types{v.x()->type()};
}

absl::StatusOr<Types> inferConv2dBackwardFilter(const Node& n) {
  const Conv2dBackwardFilterView v(n);
  auto y = convOutput(n, v.kX, v.kW, nullptr);
  if (!y.ok()) return y.status();
  if (absl::Status s = expectType(n, v.kDy, *y, "the forward output type"); !s.ok()) return s;
  const TensorType& w = v.w()->type();
  Types out{w};
  if (v.bias()) out.push_back(TensorType{w.dtype, {w.shape[0]}});
  return out;
}

}  // namespace

absl::Status gradConv2d(GradContext& c) {
  const Node& n = c.node();
  const Hw stride = attr::stride(n), pad = attr::pad(n);
  const int64_t groups = attr::groups(n);
  Value* dy = c.resultGrad(0);
  Value *x = n.operand(0), *w = n.operand(1);
  Value* b = n.numOperands() > 2 ? n.operand(2) : nullptr;
  if (c.needsGrad(0)) {
    auto dx = c.emit(Conv2dBackwardDataArgs{
        .dy = dy, .w = w, .x = x, .stride = stride, .pad = pad, .groups = groups}
                         .spec({.names = {gradName(x)}}));
    if (!dx.ok()) return dx.status();
    c.addOperandGrad(0, (*dx)->result());
  }
  const bool bias = b != nullptr;
  if (c.needsGrad(1) || (bias && c.needsGrad(2))) {
    std::vector<std::string> names{gradName(w)};
    if (bias) names.push_back(gradName(b));
    auto dw = c.emit(Conv2dBackwardFilterArgs{
        .dy = dy, .x = x, .w = w, .stride = stride, .pad = pad, .groups = groups, .bias = bias}
                         .spec({.names = names}));
    if (!dw.ok()) return dw.status();
    if (c.needsGrad(1)) c.addOperandGrad(1, (*dw)->result(0));
    if (bias && c.needsGrad(2)) c.addOperandGrad(2, (*dw)->result(1));
  }
  return absl::OkStatus();
}

extern const OpRules kConv2dRules{.infer = inferConv2d, .grad = gradConv2d};
extern const OpRules kConv2dBackwardDataRules{.infer = inferConv2dBackwardData};
extern const OpRules kConv2dBackwardFilterRules{.infer = inferConv2dBackwardFilter};

}  // namespace tandem::ir
