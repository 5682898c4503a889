// pad and pad_backward: one shape rule reads the padded shape off x and `pads`; the
// gradient is pad_backward(dy, x) with the forward's attributes (gradFromInput).

#include "absl/strings/str_join.h"
#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// The most axes a pad takes (backend/pad_math.h's kernels hold one extent per axis).
constexpr size_t kMaxPadRank = 8;

/// x's type padded by the node's `pads` (begins, then ends), checked against its mode.
absl::StatusOr<TensorType> paddedType(const Node& n, size_t x) {
  const TensorType& t = typeOf(n, x);
  const std::vector<int64_t>& pads = attr::pads(n);
  const size_t rank = t.shape.size();
  if (rank == 0 || rank > kMaxPadRank)
    return fail(absl::StrCat(describeOperand(n, x), " must have rank 1 to ", kMaxPadRank));
  if (pads.size() != 2 * rank)
    return fail(absl::StrCat("pads [", absl::StrJoin(pads, ","), "] must hold ", 2 * rank,
                             " numbers for ", describeOperand(n, x),
                             " (the begins of its axes, then the ends)"));
  TensorType out = t;
  for (size_t a = 0; a < rank; ++a) {
    const int64_t b = pads[a], e = pads[a + rank], dim = t.shape[a];
    if (b < 0 || e < 0)
      return fail(absl::StrCat("pads [", absl::StrJoin(pads, ","), "] must be >= 0"));
    if (attr::mode(n) == PadMode::kReflect && (b >= dim || e >= dim))
      return fail(absl::StrCat("reflect padding ", b, " and ", e, " of axis ", a, " of ",
                               describeOperand(n, x), " must each be below its extent ", dim));
    if (__builtin_add_overflow(dim, b, &out.shape[a]) ||
        __builtin_add_overflow(out.shape[a], e, &out.shape[a]))
      return fail(absl::StrCat("pads [", absl::StrJoin(pads, ","), "] are too large"));
  }
  return out;
}

absl::StatusOr<Types> inferPad(const Node& n) {
  auto y = paddedType(n, 0);
  if (!y.ok()) return y.status();
  return Types{*y};
}

absl::StatusOr<Types> inferPadBackward(const Node& n) {  // dy, x
  auto y = paddedType(n, 1);
  if (!y.ok()) return y.status();
  if (absl::Status s = expectType(n, 0, *y, "the forward output type"); !s.ok()) return s;
  return Types{typeOf(n, 1)};
}

}  // namespace

extern const OpRules kPadRules{.infer = inferPad, .grad = gradFromInput<Op::kPadBackward>};
extern const OpRules kPadBackwardRules{.infer = inferPadBackward};

}  // namespace tandem::ir
