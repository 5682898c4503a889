// The op table (generated from ir/ops.td) and what is derived from it: names, lookup,
// traits, rules.

#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ir/interfaces.h"
#include "ir/op_info.h"

namespace tandem::ir {
namespace {

TEST(OpTable, EveryOpHasAShapeRule) {
  for (const auto& info : allOps()) EXPECT_NE(info.rules->infer, nullptr) << info.name;
}

TEST(OpTable, TableOrderMatchesTheEnum) {
  for (size_t i = 0; i < allOps().size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(allOps()[i].op), i) << allOps()[i].name;
    EXPECT_EQ(&opInfo(allOps()[i].op), &allOps()[i]);
  }
}

TEST(OpTable, NamesAreUniqueSnakeCaseAndLookUp) {
  std::set<std::string> seen;
  for (const auto& info : allOps()) {
    std::string name(info.name);
    EXPECT_TRUE(seen.insert(name).second) << name << " is listed twice";
    EXPECT_FALSE(name.empty());
    for (char c : name)
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << name;
    auto op = opByName(name);
    ASSERT_TRUE(op.has_value()) << name;
    EXPECT_EQ(*op, info.op) << name;
    EXPECT_FALSE(info.doc.empty()) << name << " has no doc line";
  }
  EXPECT_FALSE(opByName("").has_value());
  EXPECT_FALSE(opByName("Conv2d").has_value());
  EXPECT_FALSE(opByName("conv2d ").has_value());
}

TEST(OpTable, BackwardOpsHaveNoGradientRule) {
  for (const auto& info : allOps())
    if (info.has(kBackward)) {
      EXPECT_EQ(info.rules->grad, nullptr) << info.name;
    }
}

TEST(OpTable, EachBackwardOpBelongsToADifferentiableForwardOp) {
  // "conv2d_backward_filter" is part of conv2d's gradient, so conv2d must have a rule.
  for (const auto& info : allOps()) {
    if (!info.has(kBackward)) continue;
    size_t cut = info.name.find("_backward");
    ASSERT_NE(cut, absl::string_view::npos) << info.name;
    auto forward = opByName(info.name.substr(0, cut));
    ASSERT_TRUE(forward.has_value()) << info.name;
    EXPECT_FALSE(opInfo(*forward).has(kBackward)) << info.name;
    EXPECT_NE(opInfo(*forward).rules->grad, nullptr) << info.name;
  }
}

TEST(OpTable, DifferentiableForwardOpsHaveGradientRules) {
  // The ops over an axis and the broadcasting ones, whose gradients are the same ops
  // (compare's rule says that nothing flows through it).
  const std::set<Op> axis_ops = {Op::kScale,      Op::kAddBcast,   Op::kMulBcast,  Op::kReduceSum,
                                 Op::kReduceMean, Op::kConcatAxis, Op::kSliceAxis, Op::kCompare,
                                 Op::kWhere,      Op::kMod};
  // The forward layers of the spec that carry a gradient; accuracy (a count) does not.
  // The fused forward ops differentiate too (fold_batch_norm and conv2d_bias_act, for
  // inference only, have a rule that says so; conv2d_relu_avg_pool gives its filter's).
  const std::set<Op> differentiable = {Op::kConv2d,
                                       Op::kBatchNorm,
                                       Op::kRelu,
                                       Op::kMaxPool2d,
                                       Op::kAvgPool2d,
                                       Op::kGlobalAvgPool,
                                       Op::kFlatten,
                                       Op::kLinear,
                                       Op::kAdd,
                                       Op::kSoftmaxCrossEntropy,
                                       Op::kConv2dStats,
                                       Op::kBatchNormApply,
                                       Op::kFoldBatchNorm,
                                       Op::kConv2dBiasAct,
                                       Op::kConv2dReluAvgPool,
                                       Op::kCast,
                                       Op::kSigmoid,
                                       Op::kGelu,
                                       Op::kGeluTanh,
                                       Op::kTanh,
                                       Op::kMatmul,
                                       Op::kReshape,
                                       Op::kTranspose,
                                       Op::kLayerNorm,
                                       Op::kSoftmax,
                                       Op::kLogSoftmax,
                                       Op::kDropout,
                                       Op::kSoftsign,
                                       Op::kMseLoss,
                                       Op::kL1Loss,
                                       Op::kSmoothL1Loss,
                                       Op::kBceWithLogits,
                                       Op::kAttention,
                                       Op::kHardswish,
                                       Op::kHardsigmoid,
                                       Op::kRelu6,
                                       Op::kSilu,
                                       Op::kSoftplus,
                                       Op::kExp,
                                       Op::kLog,
                                       Op::kSqrt,
                                       Op::kReciprocal,
                                       Op::kErf,
                                       Op::kAbs,
                                       Op::kSign,
                                       Op::kFloor,
                                       Op::kCeil,
                                       Op::kClip,
                                       Op::kPad};
  for (const auto& info : allOps()) {
    bool has_rule = info.rules->grad != nullptr;
    EXPECT_EQ(has_rule, differentiable.contains(info.op) || axis_ops.contains(info.op) ||
                            info.op == Op::kEmbedding)
        << info.name;
    // Every fusible layer and every loss is part of the differentiable forward pass.
    if (info.has(kFusible) || info.has(kLoss)) {
      EXPECT_TRUE(has_rule) << info.name;
    }
  }
}

TEST(OpTable, TraitsAreConsistent) {
  for (const auto& info : allOps()) {
    // Collectives group operands and results by their `devices` attribute.
    if (info.has(kCollective)) {
      EXPECT_GE(info.attrIndex("devices"), 0) << info.name;
    }
    // Stateful ops say which variables they write.
    EXPECT_EQ(info.has(kStateful), info.rules->writes != nullptr) << info.name;
    EXPECT_FALSE(info.has(kBackward) && info.has(kCollective)) << info.name;
    EXPECT_LE(info.minOperands(), info.maxOperands()) << info.name;
  }
  EXPECT_TRUE(isCollective(Op::kAllReduce));
  EXPECT_TRUE(isCollective(Op::kSplit));
  EXPECT_FALSE(isCollective(Op::kConv2d));
  EXPECT_TRUE(isStateful(Op::kSgdUpdate));
  EXPECT_TRUE(isStateful(Op::kAssign));
  EXPECT_FALSE(isStateful(Op::kParam));
}

TEST(OpTable, OperandAndAttributeSchemas) {
  const OpInfo& conv = opInfo(Op::kConv2d);
  EXPECT_EQ(conv.minOperands(), 2u);
  EXPECT_EQ(conv.maxOperands(), 3u);
  ASSERT_EQ(conv.operands.size(), 3u);
  EXPECT_EQ(conv.operands[2].name, "b");
  EXPECT_TRUE(conv.operands[2].optional);
  EXPECT_EQ(conv.attrIndex("stride"), 0);
  EXPECT_EQ(conv.attrIndex("pad"), 1);
  EXPECT_EQ(conv.attrIndex("dilation"), -1);
  const OpInfo& ar = opInfo(Op::kAllReduce);
  EXPECT_EQ(ar.minOperands(), 1u);  // a variadic operand needs at least one value
  EXPECT_EQ(ar.maxOperands(), SIZE_MAX);
  ASSERT_EQ(ar.attrs.size(), 4u);
  EXPECT_EQ(ar.attrs[0].kindText(), "enum(sum|mean|max)");
  EXPECT_FALSE(ar.attrs[0].default_value.has_value());
  ASSERT_TRUE(ar.attrs[3].default_value.has_value());  // groups:int=1, an optional attribute
  EXPECT_EQ(ar.attrs[3].name, "groups");
  EXPECT_EQ(std::get<int64_t>(*ar.attrs[3].default_value), 1);
  EXPECT_TRUE(absl::StrContains(ar.doc, "grouped by device"));
  // A float attribute with a default and a range: printed only when not 0, so loss nodes
  // written before label smoothing read the same.
  for (Op op : {Op::kSoftmaxCrossEntropy, Op::kSoftmaxCrossEntropyBackward}) {
    const OpInfo& loss = opInfo(op);
    const int i = loss.attrIndex("label_smoothing");
    ASSERT_GE(i, 0) << loss.name;
    const AttrSpec& a = loss.attrs[static_cast<size_t>(i)];
    EXPECT_EQ(a.kindText(), "float");
    ASSERT_TRUE(a.default_value.has_value()) << loss.name;
    EXPECT_EQ(std::get<double>(*a.default_value), 0.0);
    ASSERT_TRUE(a.range.has_value());
    EXPECT_TRUE(a.range->contains(0.0));
    EXPECT_TRUE(a.range->contains(0.999));
    EXPECT_FALSE(a.range->contains(1.0));
    EXPECT_FALSE(a.range->contains(-0.1));
  }
}

// The values from outside the dataflow are exactly the spec's `source` ops, which the
// plan's checks, memory planner, streams and loader skip by the trait.
TEST(OpTable, SourceTraitMarksInputAndParam) {
  std::set<Op> sources;
  for (const auto& info : allOps())
    if (isSource(info.op)) sources.insert(info.op);
  EXPECT_EQ(sources, (std::set<Op>{Op::kInput, Op::kParam}));
  for (Op op : sources) {
    EXPECT_EQ(opInfo(op).maxOperands(), 0u) << opInfo(op).name;
    EXPECT_TRUE(opInfo(op).has(kRuntime)) << opInfo(op).name;
  }
}

// `op NAME : unary_elementwise` with `grad reads x|y`: the spec makes NAME_backward(dy,
// x or y), and both entries point to one pairing that the class' rules follow.
TEST(OpTable, UnaryClassPairsEachOpWithItsBackward) {
  const std::set<std::string> reads_y = {"relu", "sigmoid", "tanh", "exp", "sqrt", "reciprocal"};
  size_t forward_ops = 0;
  for (const auto& info : allOps()) {
    if (info.op_class != "unary_elementwise") {
      EXPECT_EQ(info.grad_pair, nullptr) << info.name;
      continue;
    }
    ASSERT_NE(info.grad_pair, nullptr) << info.name;
    const GradPair& p = *info.grad_pair;
    const OpInfo& fwd = opInfo(p.forward);
    const OpInfo& bwd = opInfo(p.backward);
    EXPECT_TRUE(info.op == p.forward || info.op == p.backward) << info.name;
    EXPECT_EQ(bwd.name, std::string(fwd.name) + "_backward");
    EXPECT_TRUE(bwd.has(kBackward));
    EXPECT_FALSE(fwd.has(kBackward));
    ASSERT_EQ(bwd.operands.size(), 2u);
    EXPECT_EQ(bwd.operands[0].name, "dy");
    EXPECT_EQ(bwd.operands[1].name, p.reads == GradReads::kOutput ? "y" : "x") << bwd.name;
    EXPECT_EQ(p.reads == GradReads::kOutput, reads_y.contains(std::string(fwd.name))) << fwd.name;
    forward_ops += info.op == p.forward;
  }
  // relu, sigmoid, gelu, gelu_tanh, tanh, softsign, hardswish, hardsigmoid, relu6, silu,
  // softplus, exp, log, sqrt, reciprocal, erf, abs, sign, floor, ceil
  EXPECT_EQ(forward_ops, 20u);
}

// One-to-one ONNX mappings carry no attributes (nothing to translate) and say their opsets.
TEST(OpTable, OnnxMappings) {
  std::set<std::string> mapped;
  for (const auto& info : allOps()) {
    if (info.onnx == nullptr) continue;
    mapped.insert(std::string(info.onnx->name));
    EXPECT_TRUE(info.attrs.empty()) << info.name;
    EXPECT_GE(info.onnx->since, 1) << info.name;
    EXPECT_TRUE(info.onnx->until == 0 || info.onnx->until >= info.onnx->since) << info.name;
  }
  EXPECT_EQ(mapped, (std::set<std::string>{"Relu", "Sigmoid", "Tanh", "Softsign", "HardSwish",
                                           "Softplus", "Exp", "Log", "Sqrt", "Reciprocal", "Erf",
                                           "Abs", "Sign", "Floor", "Ceil"}));
  EXPECT_EQ(opInfo(Op::kHardswish).onnx->since, 14);
  EXPECT_EQ(opInfo(Op::kSoftsign).onnx->since, 1);
}

// The optimizers' hyper-parameters have presets (`preset`: what front ends use when
// nobody gives one): PyTorch 1.13's defaults, SGD's learning rate Tandem's own (PyTorch's
// SGD has none). The grouped and sharded forms say the same.
TEST(OpTable, OptimizerPresets) {
  auto presets = [](Op op) {
    std::map<std::string, double> out;
    for (const AttrSpec& a : opInfo(op).attrs) {
      EXPECT_TRUE(a.preset.has_value()) << opInfo(op).name << " " << a.name;
      EXPECT_FALSE(a.default_value.has_value()) << opInfo(op).name << " " << a.name;
      if (a.preset) out[a.name] = *a.preset;
    }
    return out;
  };
  const std::map<std::string, double> adamw = {
      {"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}};
  const std::map<std::string, double> sgd = {{"lr", 0.1}, {"momentum", 0}, {"weight_decay", 0}};
  for (Op op : {Op::kAdamwUpdate, Op::kAdamwUpdateGroup, Op::kAdamwUpdateShard})
    EXPECT_EQ(presets(op), adamw) << opInfo(op).name;
  for (Op op : {Op::kSgdUpdate, Op::kSgdUpdateGroup, Op::kSgdUpdateShard})
    EXPECT_EQ(presets(op), sgd) << opInfo(op).name;
}

// Operand dtypes (`labels: i32`, `x: float`): the verifier checks them before the shape
// rule, so the table must say what the rules and the passes that rely on them need.
constexpr uint8_t kF32 = dtypeBit(DType::kF32), kBF16 = dtypeBit(DType::kBF16),
                  kI32 = dtypeBit(DType::kI32);

const OperandSpec* slotNamed(const OpInfo& info, absl::string_view name) {
  for (const OperandSpec& s : info.operands)
    if (s.name == name) return &s;
  return nullptr;
}

TEST(OpTable, DTypeSetsReadAsTheMessagesSayThem) {
  EXPECT_EQ(dtypesText(kF32 | kBF16), "f32 or bf16");
  EXPECT_EQ(dtypesText(kI32), "i32");
  EXPECT_EQ(dtypesText(kF32 | kBF16 | kI32), "f32, bf16 or i32");
  const OperandSpec any{"x"};
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32, DType::kF64}) EXPECT_TRUE(any.accepts(t));
}

// A loss and accuracy read integer class labels and f32 logits, or f32 inputs and targets
// (losses are computed in f32: mixed precision casts bf16 operands up, which the
// full_precision trait asks of it).
TEST(OpTable, LossLabelsAreIntegersAndLogitsF32) {
  std::set<std::string> losses;
  for (const auto& info : allOps()) {
    if (!info.has(kLoss) && info.op != Op::kAccuracy) continue;
    losses.insert(std::string(info.name));
    EXPECT_TRUE(info.has(kFullPrecision)) << info.name;
    EXPECT_EQ(info.operands[0].dtypes, kF32) << info.name;
    if (const OperandSpec* labels = slotNamed(info, "labels")) {
      EXPECT_EQ(labels->dtypes, kI32) << info.name;
    } else {
      const OperandSpec* target = slotNamed(info, "target");
      ASSERT_NE(target, nullptr) << info.name;
      EXPECT_EQ(target->dtypes, kF32) << info.name;
    }
  }
  EXPECT_EQ(losses, (std::set<std::string>{"softmax_cross_entropy", "accuracy", "mse_loss",
                                           "l1_loss", "smooth_l1_loss", "bce_with_logits"}));
  EXPECT_EQ(slotNamed(opInfo(Op::kSoftmaxCrossEntropyBackward), "labels")->dtypes, kI32);
  // The class weights are told by `weighted` (a `present` line), so the optional total
  // may follow them.
  const OpInfo& ce = opInfo(Op::kSoftmaxCrossEntropy);
  EXPECT_EQ(slotNamed(ce, "weight")->when_attr, ce.attrIndex("weighted"));
  EXPECT_EQ(slotNamed(ce, "total")->when_attr, -1);
  EXPECT_TRUE(opInfo(Op::kTargetWeightSum).has(kDeviceSum));
}

// What mixed precision (passes/mixed_precision.cc) writes must verify: a full_precision op
// gets f32 operands (none may demand bf16); a low_precision op gets its first operand cast
// down and its weights left f32 variables, so both must take bf16 activations and f32
// weights; any op whose float operand may be low takes bf16 beside f32.
TEST(OpTable, DTypesAdmitWhatMixedPrecisionWrites) {
  for (const auto& info : allOps()) {
    for (const OperandSpec& s : info.operands) {
      if (s.dtypes & kBF16) {
        EXPECT_TRUE(s.accepts(DType::kF32)) << info.name << " " << s.name;
      }
      if (info.has(kFullPrecision)) {
        EXPECT_FALSE((s.dtypes & kBF16) != 0 || s.dtypes == 0) << info.name << " " << s.name;
      }
    }
    if (!info.has(kLowPrecision)) continue;
    EXPECT_TRUE(info.operands[0].accepts(DType::kBF16)) << info.name;
    for (const OperandSpec& s : info.operands) EXPECT_TRUE(s.accepts(DType::kF32)) << info.name;
  }
}

// An optimizer updates f32 master weights from gradients of their type or their bf16 twin
// (--allreduce-dtype bf16); embedding's ids are i32 wherever they appear.
TEST(OpTable, DTypesOfWeightsGradientsAndIds) {
  for (const auto& info : allOps()) {
    if (const OperandSpec* ids = slotNamed(info, "ids")) {
      EXPECT_EQ(ids->dtypes, kI32) << info.name;
    }
    if (info.optimizer == nullptr || info.optimizer->grouped_of) continue;
    EXPECT_EQ(info.operands[info.optimizer->param].dtypes, kF32) << info.name;
    EXPECT_EQ(info.operands[info.optimizer->grad].dtypes, kF32 | kBF16) << info.name;
  }
}

// The backward op that `grad reads` makes takes the class' dtypes: dy as y, dx as x.
TEST(OpTable, UnaryBackwardOpsTakeTheClassDTypes) {
  for (const auto& info : allOps()) {
    if (info.op_class != "unary_elementwise") continue;
    for (const OperandSpec& s : info.operands) EXPECT_EQ(s.dtypes, kF32 | kBF16) << info.name;
    for (const OperandSpec& s : info.results) EXPECT_EQ(s.dtypes, kF32 | kBF16) << info.name;
  }
}

}  // namespace
}  // namespace tandem::ir
