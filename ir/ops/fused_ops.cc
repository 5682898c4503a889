// The fused convolution / batch norm / relu ops that fuse-conv-bn-relu writes and the
// convolution / relu / pool pair of fuse-conv-relu-pool, their shape rules and (for the
// forward ones) gradient rules.
//
// Training batch norm runs in two phases: conv2d_stats gives the statistics of its output,
// batch_norm_apply normalizes with them (plus residual and relu) in one pass. Backward
// mirrors it: batch_norm_backward_reduce sums, batch_norm_backward_apply forms dy. Between
// the phases, sync batch norm all-reduces the statistics and the sums.

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/conv_rules.h"
#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// Rows of the statistics tensor (f64): count, sum, sum of squares.
constexpr int64_t kStatsRows = 3;
/// Rows of the backward sums (f64): sum dz, sum dz * (y - mean).
constexpr int64_t kSumsRows = 2;

/// y is [N,C,H,W] of f32 or bf16; the per-channel operands are f32[C].
absl::Status checkPerChannel(const Node& n, size_t y, std::initializer_list<size_t> per_channel) {
  if (absl::Status s = expectRank(n, y, 4, "N,C,H,W"); !s.ok()) return s;
  const TensorType channel = channelType(typeOf(n, y).shape[1]);
  for (size_t i : per_channel)
    if (absl::Status s = expectType(n, i, channel, "one value per channel"); !s.ok()) return s;
  return absl::OkStatus();
}

// f64: they add up across devices (sync batch norm) and the variance is their difference.
TensorType statsType(int64_t channels) { return {DType::kF64, {kStatsRows, channels}}; }
TensorType sumsType(int64_t channels) { return {DType::kF64, {kSumsRows, channels}}; }

absl::StatusOr<Types> inferConv2dStats(const Node& n) {
  const Conv2dStatsView v(n);
  auto y = convOutput(n, v.kX, v.kW, v.b());
  if (!y.ok()) return y.status();
  return Types{*y, statsType(y->shape[1])};
}

// y, stats, gamma, beta, running_mean, running_var, residual?
absl::StatusOr<Types> inferBatchNormApply(const Node& n) {
  if (absl::Status s = checkPerChannel(n, 0, {2, 3, 4, 5}); !s.ok()) return s;
  const TensorType& y = typeOf(n, 0);
  if (absl::Status s = expectType(n, 1, statsType(y.shape[1]), "count, sum and sum of squares");
      !s.ok())
    return s;
  if (n.numOperands() > 6)
    if (absl::Status s = expectSameType(n, 6, 0); !s.ok()) return s;
  for (size_t i : {4, 5})  // the running statistics are updated in place
    if (auto var = varReadBy(n, i); !var.ok()) return var.status();
  const TensorType channel = channelType(y.shape[1]);
  return Types{y, channel, channel};
}

std::vector<std::string> writesBatchNormApply(const Node& n) {
  std::vector<std::string> out;
  for (size_t i : {4, 5})
    if (auto var = varReadBy(n, i); var.ok()) out.push_back(*var);
  return out;
}

// dout, y, save_mean, save_invstd, out?
absl::StatusOr<Types> inferBatchNormBackwardReduce(const Node& n) {
  if (absl::Status s = checkPerChannel(n, 1, {2, 3}); !s.ok()) return s;
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  if (n.numOperands() > 4)
    if (absl::Status s = expectSameType(n, 4, 1); !s.ok()) return s;
  const TensorType& y = typeOf(n, 1);
  const TensorType channel = channelType(y.shape[1]);
  return Types{sumsType(y.shape[1]), channel, channel};
}

// dout, y, gamma, save_mean, save_invstd, sums, stats, out?
absl::StatusOr<Types> inferBatchNormBackwardApply(const Node& n) {
  if (absl::Status s = checkPerChannel(n, 1, {2, 3, 4}); !s.ok()) return s;
  if (absl::Status s = expectSameType(n, 0, 1); !s.ok()) return s;
  const TensorType& y = typeOf(n, 1);
  if (absl::Status s = expectType(n, 5, sumsType(y.shape[1]), "sum dz and sum dz * (y - mean)");
      !s.ok())
    return s;
  if (absl::Status s = expectType(n, 6, statsType(y.shape[1]), "count, sum and sum of squares");
      !s.ok())
    return s;
  if (n.numOperands() > 7)
    if (absl::Status s = expectSameType(n, 7, 1); !s.ok()) return s;
  if (BatchNormBackwardApplyView(n).residual()) return Types{y, y};
  return Types{y};
}

// y, stats, gamma, beta
absl::StatusOr<Types> inferBatchNormRecompute(const Node& n) {
  if (absl::Status s = checkPerChannel(n, 0, {2, 3}); !s.ok()) return s;
  const TensorType& y = typeOf(n, 0);
  if (absl::Status s = expectType(n, 1, statsType(y.shape[1]), "count, sum and sum of squares");
      !s.ok())
    return s;
  return Types{y};
}

// w, b?, gamma, beta, running_mean, running_var
absl::StatusOr<Types> inferFoldBatchNorm(const Node& n) {
  if (absl::Status s = expectRank(n, 0, 4, "O,C,KH,KW"); !s.ok()) return s;
  const TensorType& w = typeOf(n, 0);
  const TensorType channel = channelType(w.shape[0]);
  for (size_t i = 1; i < n.numOperands(); ++i)
    if (absl::Status s = expectType(n, i, channel, "one value per output channel"); !s.ok())
      return s;
  return Types{w, channel};
}

// x, w, b, residual?
absl::StatusOr<Types> inferConv2dBiasAct(const Node& n) {
  const Conv2dBiasActView v(n);
  auto y = convOutput(n, v.kX, v.kW, v.b());
  if (!y.ok()) return y.status();
  if (n.numOperands() > 3)
    if (absl::Status s = expectType(n, 3, *y, "the convolution's output type"); !s.ok()) return s;
  return Types{*y};
}

/// conv2d_relu_avg_pool's convolution output (x, w, b? checked as conv2d's), of at least
/// one 2x2 window and rows that relu's mask holds in an i32.
absl::StatusOr<TensorType> convOfPool(const Node& n, size_t x, size_t w, const Value* b) {
  auto y = convOutput(n, x, w, b);
  if (!y.ok()) return y.status();
  if (y->shape[2] < 2 || y->shape[3] < 2)
    return fail(absl::StrCat("the convolution's output is ", y->shape[2], "x", y->shape[3],
                             ": a 2x2 pooling window needs at least 2x2"));
  if (y->shape[3] > 32)
    return fail(absl::StrCat("the convolution's rows are ", y->shape[3],
                             " wide: relu's mask keeps a row in an i32 (at most 32)"));
  return y;
}
TensorType pooledOf(const TensorType& y) {
  return {y.dtype, {y.shape[0], y.shape[1], y.shape[2] / 2, y.shape[3] / 2}};
}
TensorType maskOf(const TensorType& y) {
  return {DType::kI32, {y.shape[0], y.shape[1], y.shape[2]}};
}

// x, w, b? -> y, mask
absl::StatusOr<Types> inferConv2dReluAvgPool(const Node& n) {
  const Conv2dReluAvgPoolView v(n);
  auto y = convOfPool(n, v.kX, v.kW, v.b());
  if (!y.ok()) return y.status();
  return Types{pooledOf(*y), maskOf(*y)};
}

// dy, x, w, mask -> dw, db? (db when bias=true)
absl::StatusOr<Types> inferConv2dReluAvgPoolBackwardFilter(const Node& n) {
  const Conv2dReluAvgPoolBackwardFilterView v(n);
  auto y = convOfPool(n, v.kX, v.kW, nullptr);
  if (!y.ok()) return y.status();
  if (absl::Status s = expectType(n, v.kDy, pooledOf(*y), "the pooled output type"); !s.ok())
    return s;
  if (absl::Status s = expectType(n, v.kMask, maskOf(*y), "relu's mask, a row an i32"); !s.ok())
    return s;
  const TensorType& w = v.w()->type();
  Types out{w};
  if (v.bias()) out.push_back(TensorType{w.dtype, {w.shape[0]}});
  return out;
}

/// The filter's and bias's gradients; x gets none: the op stands for a first convolution
/// (fuse-conv-relu-pool fuses only those), and its backward keeps nothing to give one.
absl::Status gradConv2dReluAvgPool(GradContext& c) {
  const Conv2dReluAvgPoolView v(c.node());
  if (c.needsGrad(v.kX))
    return fail(absl::StrCat("conv2d_relu_avg_pool has no gradient for its input ",
                             describeOperand(c.node(), v.kX),
                             ": write conv2d -> relu -> avg_pool2d where the input needs one"));
  Value* b = v.b();
  const bool bias = b != nullptr;
  if (!c.needsGrad(v.kW) && !(bias && c.needsGrad(v.kB))) return absl::OkStatus();
  Value* dy = c.resultGrad(0);
  if (dy == nullptr) return absl::OkStatus();
  std::vector<std::string> names{gradName(v.w())};
  if (bias) names.push_back(gradName(b));
  auto dw = c.emit(Conv2dReluAvgPoolBackwardFilterArgs{.dy = dy,
                                                       .x = v.x(),
                                                       .w = v.w(),
                                                       .mask = v.mask(),
                                                       .stride = v.stride(),
                                                       .pad = v.pad(),
                                                       .groups = v.groups(),
                                                       .bias = bias}
                       .spec({.names = names}));
  if (!dw.ok()) return dw.status();
  if (c.needsGrad(v.kW)) c.addOperandGrad(v.kW, (*dw)->result(0));
  if (bias && c.needsGrad(v.kB)) c.addOperandGrad(v.kB, (*dw)->result(1));
  return absl::OkStatus();
}

absl::Status gradBatchNormApply(GradContext& c) {
  const BatchNormApplyView v(c.node());
  Value *y = v.y(), *stats = v.stats(), *gamma = v.gamma(), *beta = v.beta();
  Value* dout = c.resultGrad(0);
  if (dout == nullptr) return absl::OkStatus();
  const bool relu = v.relu(), residual = v.residual() != nullptr;
  // With relu, the output says where the gradient passes (out > 0).
  Value* out = relu ? v.out() : nullptr;
  auto reduce = c.emit(BatchNormBackwardReduceArgs{
      .dout = dout, .y = y, .save_mean = v.save_mean(), .save_invstd = v.save_invstd(), .out = out}
                           .spec({.names = {y->name() + ".bn_sums", gradName(beta),
                                            gradName(gamma)}}));
  if (!reduce.ok()) return reduce.status();
  std::vector<std::string> names{gradName(y)};
  if (residual) names.push_back(gradName(v.residual()));
  BatchNormBackwardApplyArgs args{.dout = dout,
                                  .y = y,
                                  .gamma = gamma,
                                  .save_mean = v.save_mean(),
                                  .save_invstd = v.save_invstd(),
                                  .sums = (*reduce)->result(0),
                                  .stats = stats,
                                  .out = out,
                                  .residual = residual};
  auto apply = c.emit(args.spec({.names = std::move(names)}));
  if (!apply.ok()) return apply.status();
  if (c.needsGrad(0)) c.addOperandGrad(0, (*apply)->result(0));
  if (c.needsGrad(2)) c.addOperandGrad(2, (*reduce)->result(2));
  if (c.needsGrad(3)) c.addOperandGrad(3, (*reduce)->result(1));
  if (residual && c.needsGrad(6))
    c.addOperandGrad(BatchNormApplyView::kResidual, (*apply)->result(1));
  return absl::OkStatus();
}

absl::Status noGradientInTraining(GradContext& c) {
  return fail(absl::StrCat(c.node().opName(),
                           " folds inference batch norm (eval_step); it has no gradient"));
}

}  // namespace

// The statistics carry no gradient of their own: batch_norm_apply's backward already
// differentiates through them (the batch statistics are functions of y).
extern const OpRules kConv2dStatsRules{.infer = inferConv2dStats, .grad = gradConv2d};
extern const OpRules kBatchNormApplyRules{
    .infer = inferBatchNormApply, .grad = gradBatchNormApply, .writes = writesBatchNormApply};
extern const OpRules kBatchNormBackwardReduceRules{.infer = inferBatchNormBackwardReduce};
extern const OpRules kBatchNormBackwardApplyRules{.infer = inferBatchNormBackwardApply};
extern const OpRules kBatchNormRecomputeRules{.infer = inferBatchNormRecompute};
extern const OpRules kFoldBatchNormRules{.infer = inferFoldBatchNorm, .grad = noGradientInTraining};
extern const OpRules kConv2dBiasActRules{.infer = inferConv2dBiasAct, .grad = noGradientInTraining};
extern const OpRules kConv2dReluAvgPoolRules{.infer = inferConv2dReluAvgPool,
                                             .grad = gradConv2dReluAvgPool};
extern const OpRules kConv2dReluAvgPoolBackwardFilterRules{
    .infer = inferConv2dReluAvgPoolBackwardFilter};

}  // namespace tandem::ir
