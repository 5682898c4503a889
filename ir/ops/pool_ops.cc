// Pooling and flatten, with their backward ops. Every backward op here takes (dy, x) and
// returns a tensor of x's type, so one shape rule and one gradient rule serve them all.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// The output of a window of the attributes of `View` (max or average pooling, or their
/// backward ops) over operand x.
template <typename View>
absl::StatusOr<TensorType> windowedOutput(const Node& n, size_t x) {
  if (absl::Status s = expectRank(n, x, 4, "N,C,H,W"); !s.ok()) return s;
  const TensorType& t = typeOf(n, x);
  const View v(n);
  const Hw k = v.kernel(), stride = v.stride(), pad = v.pad();
  if (2 * pad.h > k.h || 2 * pad.w > k.w)
    return fail(absl::StrCat("padding ", toString(pad.toAttr()),
                             " must be at most half the kernel ", toString(k.toAttr()),
                             " along each axis"));
  auto h = windowExtent(t.shape[2], k.h, stride.h, pad.h, "height", v.ceil_mode());
  if (!h.ok()) return h.status();
  auto w = windowExtent(t.shape[3], k.w, stride.w, pad.w, "width", v.ceil_mode());
  if (!w.ok()) return w.status();
  return TensorType{t.dtype, {t.shape[0], t.shape[1], *h, *w}};
}

absl::StatusOr<TensorType> globalPoolOutput(const Node& n, size_t x) {
  if (absl::Status s = expectRank(n, x, 4, "N,C,H,W"); !s.ok()) return s;
  const TensorType& t = typeOf(n, x);
  return TensorType{t.dtype, {t.shape[0], t.shape[1], 1, 1}};
}

absl::StatusOr<TensorType> flattenOutput(const Node& n, size_t x) {
  const TensorType& t = typeOf(n, x);
  if (t.rank() < 2) return fail(absl::StrCat(describeOperand(n, x), " must have rank >= 2"));
  // The product of the trailing dims, not numElements() / N: that overflows for a huge
  // batch and gave a wrong feature count (and so wrong parameter shapes downstream).
  int64_t features = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) features *= t.shape[i];
  return TensorType{t.dtype, {t.shape[0], features}};
}

using OutputFn = absl::StatusOr<TensorType> (*)(const Node&, size_t);

template <OutputFn kOutput>
absl::StatusOr<Types> inferForward(const Node& n) {
  auto y = kOutput(n, 0);
  if (!y.ok()) return y.status();
  return Types{*y};
}

template <OutputFn kOutput>
absl::StatusOr<Types> inferBackward(const Node& n) {  // dy, x
  auto y = kOutput(n, 1);
  if (!y.ok()) return y.status();
  if (absl::Status s = expectType(n, 0, *y, "the forward output type"); !s.ok()) return s;
  return Types{typeOf(n, 1)};
}

}  // namespace

extern const OpRules kMaxPool2dRules{.infer = inferForward<windowedOutput<MaxPool2dView>>,
                                     .grad = gradFromInput<Op::kMaxPool2dBackward>};
extern const OpRules kMaxPool2dBackwardRules{
    .infer = inferBackward<windowedOutput<MaxPool2dBackwardView>>};
extern const OpRules kAvgPool2dRules{.infer = inferForward<windowedOutput<AvgPool2dView>>,
                                     .grad = gradFromInput<Op::kAvgPool2dBackward>};
extern const OpRules kAvgPool2dBackwardRules{
    .infer = inferBackward<windowedOutput<AvgPool2dBackwardView>>};
extern const OpRules kGlobalAvgPoolRules{.infer = inferForward<globalPoolOutput>,
                                         .grad = gradFromInput<Op::kGlobalAvgPoolBackward>};
extern const OpRules kGlobalAvgPoolBackwardRules{.infer = inferBackward<globalPoolOutput>};
extern const OpRules kFlattenRules{.infer = inferForward<flattenOutput>,
                                   .grad = gradFromInput<Op::kFlattenBackward>};
extern const OpRules kFlattenBackwardRules{.infer = inferBackward<flattenOutput>};

}  // namespace tandem::ir
