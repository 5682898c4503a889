// conv2d and its two backward ops.

#include "ir/grad.h"
#include "ir/ops/conv_rules.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
using namespace rules;

absl::StatusOr<TensorType> convOutput(const Node& n, size_t x, size_t w, const Value* bias) {
  for (size_t i : {x, w}) {
    if (absl::Status s = expectRank(n, i, 4, i == x ? "N,C,H,W" : "O,C,KH,KW"); !s.ok()) return s;
    if (absl::Status s = expectFloat(n, i); !s.ok()) return s;
  }
  const TensorType& xt = typeOf(n, x);
  const TensorType& wt = typeOf(n, w);
  if (absl::Status s = expectWeightDType(n, w, xt.dtype); !s.ok()) return s;
  if (xt.shape[1] != wt.shape[1])
    return fail(absl::StrCat("the input has ", xt.shape[1], " channels but the filter ",
                             describeOperand(n, w), " expects ", wt.shape[1]));
  if (wt.shape[2] != wt.shape[3])
    return fail(absl::StrCat("the filter ", describeOperand(n, w), " must be square"));
  if (bias != nullptr && bias->type() != TensorType{wt.dtype, {wt.shape[0]}})
    return fail(absl::StrCat("the bias %", bias->name(), ": ", toString(bias->type()), " must be ",
                             toString(TensorType{wt.dtype, {wt.shape[0]}}), " (the filter's dtype)"));
  int64_t stride = n.intAttr("stride"), pad = n.intAttr("pad");
  auto h = windowExtent(xt.shape[2], wt.shape[2], stride, pad, "height");
  if (!h.ok()) return h.status();
  auto wd = windowExtent(xt.shape[3], wt.shape[3], stride, pad, "width");
  if (!wd.ok()) return wd.status();
  return TensorType{xt.dtype, {xt.shape[0], wt.shape[0], *h, *wd}};
}

namespace {

absl::StatusOr<Types> inferConv2d(const Node& n) {
  auto y = convOutput(n, 0, 1, n.numOperands() > 2 ? n.operand(2) : nullptr);
  if (!y.ok()) return y.status();
  return Types{*y};
}

absl::StatusOr<Types> inferConv2dBackwardData(const Node& n) {  // dy, w, x
  auto y = convOutput(n, 2, 1, nullptr);
  if (!y.ok()) return y.status();
  if (absl::Status s = expectType(n, 0, *y, "the forward output type"); !s.ok()) return s;
  return Types{typeOf(n, 2)};
}

absl::StatusOr<Types> inferConv2dBackwardFilter(const Node& n) {  // dy, x, w
  auto y = convOutput(n, 1, 2, nullptr);
  if (!y.ok()) return y.status();
  if (absl::Status s = expectType(n, 0, *y, "the forward output type"); !s.ok()) return s;
  Types out{typeOf(n, 2)};
  if (n.boolAttr("bias")) out.push_back(TensorType{typeOf(n, 2).dtype, {typeOf(n, 2).shape[0]}});
  return out;
}

}  // namespace

absl::Status gradConv2d(GradContext& c) {
  const Node& n = c.node();
  Value* dy = c.resultGrad(0);
  Value *x = n.operand(0), *w = n.operand(1);
  AttrValue stride = n.intAttr("stride"), pad = n.intAttr("pad");
  if (c.needsGrad(0)) {
    auto dx = c.emit(Op::kConv2dBackwardData, {dy, w, x}, {{"stride", stride}, {"pad", pad}},
                     {gradName(x)});
    if (!dx.ok()) return dx.status();
    c.addOperandGrad(0, (*dx)->result());
  }
  bool bias = n.numOperands() > 2;
  if (c.needsGrad(1) || (bias && c.needsGrad(2))) {
    std::vector<std::string> names{gradName(w)};
    if (bias) names.push_back(gradName(n.operand(2)));
    auto dw = c.emit(Op::kConv2dBackwardFilter, {dy, x, w},
                     {{"stride", stride}, {"pad", pad}, {"bias", bias}}, names);
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
