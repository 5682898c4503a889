// attention (fused scaled-dot-product attention) and its backward op.

#include <cstdint>

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// The batch, the sequence lengths and the heads' widths that q [N, Tq, H*d], k [N, Tk,
/// H*d] and v [N, Tk, H*dv] (operands `q`, `q + 1`, `q + 2`) describe.
struct AttentionDims {
  int64_t batch, queries, keys, depth, value_depth;
};

absl::StatusOr<AttentionDims> attentionDims(const Node& n, size_t q, int64_t heads) {
  for (size_t i = q; i < q + 3; ++i) {
    RETURN_IF_ERROR(expectRank(n, i, 3, "[batch, tokens, heads * head width]"));
    if (typeOf(n, i).shape[2] % heads != 0)
      return fail(absl::StrCat(describeOperand(n, i), ": its last axis does not divide into ",
                               heads, " heads"));
  }
  const Shape &qs = typeOf(n, q).shape, &ks = typeOf(n, q + 1).shape, &vs = typeOf(n, q + 2).shape;
  if (ks[0] != qs[0] || vs[0] != qs[0])
    return fail(absl::StrCat(describeOperand(n, q), ", ", describeOperand(n, q + 1), " and ",
                             describeOperand(n, q + 2), " must have the same batch (axis 0)"));
  if (ks[2] != qs[2])
    return fail(absl::StrCat(describeOperand(n, q), " and ", describeOperand(n, q + 1),
                             " must have the same width (axis 2): each query meets each key"));
  if (vs[1] != ks[1])
    return fail(absl::StrCat(describeOperand(n, q + 1), " and ", describeOperand(n, q + 2),
                             " must have the same tokens (axis 1): one value per key"));
  return AttentionDims{qs[0], qs[1], ks[1], qs[2] / heads, vs[2] / heads};
}

/// step is there exactly when there is dropout, and the mask's counter holds the elements.
template <typename View>
absl::Status checkAttentionDropout(const Node& n, const View& v, size_t step,
                                   const AttentionDims& d) {
  if ((v.p() > 0) != (v.step() != nullptr))
    return fail(v.p() > 0 ? absl::StrCat("dropout p=", v.p(), " needs the step operand (@step)")
                          : std::string("a step operand without dropout (p=0) draws nothing"));
  if (v.step() != nullptr) RETURN_IF_ERROR(expectStepOperand(n, step));
  const int64_t per_sample = v.heads() * d.queries * d.keys;
  if (v.sample_offset() > (int64_t{1} << 32) - d.batch || per_sample > (int64_t{1} << 35))
    return fail(absl::StrCat("rows from sample_offset=", v.sample_offset(), " with ", per_sample,
                             " probabilities each are past the dropout mask's counter (rows "
                             "below 2^32, at most 2^35 elements a row)"));
  return absl::OkStatus();
}

absl::StatusOr<Types> inferAttention(const Node& n) {  // q, k, v, step?
  const AttentionView v(n);
  ASSIGN_OR_RETURN(AttentionDims d, attentionDims(n, 0, v.heads()));
  RETURN_IF_ERROR(checkAttentionDropout(n, v, 3, d));
  return Types{TensorType{DType::kF32, {d.batch, d.queries, v.heads() * d.value_depth}},
               TensorType{DType::kF32, {d.batch, v.heads(), d.queries}}};
}

absl::StatusOr<Types> inferAttentionBackward(const Node& n) {  // dy, q, k, v, y, lse, step?
  const AttentionBackwardView v(n);
  ASSIGN_OR_RETURN(AttentionDims d, attentionDims(n, 1, v.heads()));
  const TensorType y{DType::kF32, {d.batch, d.queries, v.heads() * d.value_depth}};
  RETURN_IF_ERROR(expectType(n, 0, y, "the gradient of the forward's output"));
  RETURN_IF_ERROR(expectType(n, 4, y, "the forward's output"));
  RETURN_IF_ERROR(expectType(n, 5, TensorType{DType::kF32, {d.batch, v.heads(), d.queries}},
                             "the forward's log-sum-exp per head and query"));
  RETURN_IF_ERROR(checkAttentionDropout(n, v, 6, d));
  return Types{typeOf(n, 1), typeOf(n, 2), typeOf(n, 3)};
}

// One backward op for the three inputs: the probabilities are recomputed once for dq, dk
// and dv together (FlashAttention's backward), from the output and the log-sum-exp.
absl::Status gradAttention(GradContext& c) {
  const Node& n = c.node();
  const AttentionView v(n);
  ASSIGN_OR_RETURN(
      Node * back,
      c.emit(AttentionBackwardArgs{.dy = c.resultGrad(0),
                                   .q = v.q(),
                                   .k = v.k(),
                                   .v = v.v(),
                                   .y = n.result(0),
                                   .lse = n.result(1),
                                   .step = v.step(),
                                   .heads = v.heads(),
                                   .scale = v.scale(),
                                   .causal = v.causal(),
                                   .p = v.p(),
                                   .mask_id = v.mask_id(),
                                   .sample_offset = v.sample_offset()}
                 .spec({.names = {gradName(v.q()), gradName(v.k()), gradName(v.v())}})));
  for (size_t i = 0; i < 3; ++i)
    if (c.needsGrad(i)) c.addOperandGrad(i, back->result(i));
  return absl::OkStatus();
}

// ---- generation with a KV cache --------------------------------------------------------

/// position is i32[N]: one entry per row of the batch (replicate splits it with the rows).
absl::Status checkPosition(const Node& n, size_t i, int64_t batch) {
  return expectType(n, i, TensorType{DType::kI32, {batch}}, "the token's position, one per row");
}

absl::StatusOr<Types> inferKvWrite(const Node& n) {  // cache, x, position
  RETURN_IF_ERROR(expectRank(n, 0, 3, "[batch, tokens, width]"));
  ASSIGN_OR_RETURN(std::string var, varReadBy(n, 0));
  (void)var;
  const Shape& cache = typeOf(n, 0).shape;
  RETURN_IF_ERROR(expectType(n, 1, TensorType{DType::kF32, {cache[0], 1, cache[2]}},
                             "one token's row for each of the cache's rows"));
  RETURN_IF_ERROR(checkPosition(n, 2, cache[0]));
  return Types{typeOf(n, 0)};
}

std::vector<std::string> writesKvWrite(const Node& n) {
  absl::StatusOr<std::string> var = varReadBy(n, 0);
  return var.ok() ? std::vector<std::string>{*var} : std::vector<std::string>{};
}

absl::StatusOr<Types> inferAttentionCached(const Node& n) {  // q, k, v, position
  const AttentionCachedView v(n);
  ASSIGN_OR_RETURN(AttentionDims d, attentionDims(n, 0, v.heads()));
  if (d.queries != 1)
    return fail(absl::StrCat(describeOperand(n, 0),
                             " must hold one token (axis 1 of size 1): "
                             "a cached step adds one token"));
  RETURN_IF_ERROR(checkPosition(n, 3, d.batch));
  return Types{TensorType{DType::kF32, {d.batch, 1, v.heads() * d.value_depth}}};
}

}  // namespace

extern const OpRules kKvWriteRules{.infer = inferKvWrite, .writes = writesKvWrite};
extern const OpRules kAttentionCachedRules{.infer = inferAttentionCached};
extern const OpRules kAttentionRules{.infer = inferAttention, .grad = gradAttention};
extern const OpRules kAttentionBackwardRules{.infer = inferAttentionBackward};

}  // namespace tandem::ir
