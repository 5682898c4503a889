// batch_norm and layer_norm with their backward ops.

#include <cstdint>

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// x is [N,C,H,W] or [N,C] of f32 or bf16; every per-channel operand must be f32[C].
absl::Status checkChannels(const Node& n, size_t x, std::initializer_list<size_t> per_channel) {
  const TensorType& xt = typeOf(n, x);
  if (xt.rank() != 4 && xt.rank() != 2)
    return fail(absl::StrCat(describeOperand(n, x), " must have rank 4 (N,C,H,W) or 2 (N,C)"));
  const TensorType channel = channelType(xt.shape[1]);
  for (size_t i : per_channel)
    if (absl::Status s = expectType(n, i, channel, "one value per channel"); !s.ok()) return s;
  return absl::OkStatus();
}

absl::StatusOr<Types> inferBatchNorm(const Node& n) {
  if (absl::Status s = checkChannels(n, 0, {1, 2, 3, 4}); !s.ok()) return s;
  const TensorType& x = typeOf(n, 0);
  if (!BatchNormView(n).training()) return Types{x};
  for (size_t i : {3, 4})  // training updates the running statistics in place
    if (auto var = varReadBy(n, i); !var.ok()) return var.status();
  return Types{x, channelType(x.shape[1]), channelType(x.shape[1])};
}

std::vector<std::string> writesBatchNorm(const Node& n) {
  if (!BatchNormView(n).training()) return {};
  std::vector<std::string> out;
  for (size_t i : {3, 4})
    if (auto var = varReadBy(n, i); var.ok()) out.push_back(*var);
  return out;
}

absl::StatusOr<Types> inferBatchNormBackward(const Node& n) {  // dy, x, gamma, mean, invstd
  if (absl::Status s = checkChannels(n, 1, {2, 3, 4}); !s.ok()) return s;
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  return Types{typeOf(n, 1), typeOf(n, 2), typeOf(n, 2)};
}

absl::Status gradBatchNorm(GradContext& c) {
  const Node& n = c.node();
  const BatchNormView v(n);
  if (!v.training())
    return fail(
        "batch_norm in inference mode has no gradient; build the training step "
        "with training=true");
  Value *x = n.operand(0), *gamma = n.operand(1), *beta = n.operand(2);
  auto back = c.emit(BatchNormBackwardArgs{.dy = c.resultGrad(0),
                                           .x = x,
                                           .gamma = gamma,
                                           .save_mean = v.save_mean(),
                                           .save_invstd = v.save_invstd(),
                                           .eps = v.eps()}
                         .spec({.names = {gradName(x), gradName(gamma), gradName(beta)}}));
  if (!back.ok()) return back.status();
  for (size_t i = 0; i < 3; ++i)
    if (c.needsGrad(i)) c.addOperandGrad(i, (*back)->result(i));
  return absl::OkStatus();
}

// ---- layer_norm ----------------------------------------------------------------------

/// x[..., W] of f32 or bf16 with gamma, beta f32[W]: the type of the rows' statistics,
/// f32[...] (x's shape without its last axis).
absl::StatusOr<TensorType> rowStatsType(const Node& n, size_t x, size_t gamma, size_t beta) {
  const TensorType& xt = typeOf(n, x);
  if (xt.rank() < 1)
    return fail(absl::StrCat(describeOperand(n, x), " must have rank 1 or more ([..., width])"));
  const TensorType width{DType::kF32, {xt.shape.back()}};
  for (size_t i : {gamma, beta})
    if (i != SIZE_MAX) RETURN_IF_ERROR(expectType(n, i, width, "one value per element of a row"));
  return TensorType{DType::kF32, Shape(xt.shape.begin(), xt.shape.end() - 1)};
}

absl::StatusOr<Types> inferLayerNorm(const Node& n) {  // x, gamma, beta
  ASSIGN_OR_RETURN(TensorType stats, rowStatsType(n, 0, 1, 2));
  return Types{typeOf(n, 0), stats, stats};
}

absl::Status gradLayerNorm(GradContext& c) {
  const Node& n = c.node();
  const LayerNormView v(n);
  ASSIGN_OR_RETURN(
      Node * back,
      c.emit(LayerNormBackwardArgs{.dy = c.resultGrad(0),
                                   .x = v.x(),
                                   .mean = v.mean(),
                                   .var = v.var(),
                                   .gamma = v.gamma(),
                                   .eps = v.eps()}
                 .spec({.names = {gradName(v.x()), gradName(v.gamma()), gradName(v.beta())}})));
  for (size_t i = 0; i < 3; ++i)
    if (c.needsGrad(i)) c.addOperandGrad(i, back->result(i));
  return absl::OkStatus();
}

absl::StatusOr<Types> inferLayerNormBackward(const Node& n) {  // dy, x, mean, var, gamma
  ASSIGN_OR_RETURN(TensorType stats, rowStatsType(n, 1, 4, SIZE_MAX));
  RETURN_IF_ERROR(expectSameType(n, 0, 1));
  for (size_t i : {size_t{2}, size_t{3}})
    RETURN_IF_ERROR(expectType(n, i, stats, "the forward's statistics, one per row"));
  const TensorType width{DType::kF32, {typeOf(n, 1).shape.back()}};
  return Types{typeOf(n, 1), width, width};
}

}  // namespace

extern const OpRules kBatchNormRules{
    .infer = inferBatchNorm, .grad = gradBatchNorm, .writes = writesBatchNorm};
extern const OpRules kBatchNormBackwardRules{.infer = inferBatchNormBackward};
extern const OpRules kLayerNormRules{.infer = inferLayerNorm, .grad = gradLayerNorm};
extern const OpRules kLayerNormBackwardRules{.infer = inferLayerNormBackward};

}  // namespace tandem::ir
