// The Builder's losses in a compiled module trained one SGD step from PyTorch's initial
// values on 1 device, 2 devices and a 3:1 split: the loss and the updated weights are
// PyTorch 1.13's (tests/data/gen_loss_refs.py), so the gradients are too. The sequence
// model's cross-entropy over the last axis ignores tokens and weighs classes, its mean
// dividing by the global sum of the counted tokens' weights: the ignored tokens sit
// unevenly on the devices, so per-device means averaged, or a static divisor, would miss.
// Its target_weight_sum is all-reduced before the loss reads it (device_sum).

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/backends.h"
#include "frontend/builder.h"
#include "frontend/builder_internals.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "tests/cores/ref_case.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

RefCase lossReference(const std::string& name) {
  auto loaded = RefCase::load("../loss_refs/" + name);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? *loaded : RefCase();
}

std::vector<float> refValues(const RefTensor& t) { return t.f32(); }

/// x [N, T, D] -> linear over D (as [N*T, D]) -> logits [N, T, V] -> crossEntropy over the
/// last axis with class weights, ignore_index and label smoothing.
absl::Status buildSequenceStep(Builder& b, ir::Graph* g, bool training, const RefCase& c) {
  const int64_t n = c.integer("batch"), t = c.integer("tokens"), d = c.integer("width"),
                v = c.integer("vocab");
  BuilderInternals::beginGraph(b, g, training);
  Tensor x = BuilderInternals::addInput(b, "x", {ir::DType::kF32, {n, t, d}});
  Tensor y = BuilderInternals::addInput(b, "y", {ir::DType::kI32, {n, t}});
  Tensor h = b.linear(b.reshape(x, {-1, d}), {.out_features = v, .name = "fc"});
  Tensor logits = b.reshape(h, {-1, t, v});
  Tensor loss = b.crossEntropy(logits, y,
                               {.axis = -1,
                                .ignore_index = c.integer("ignore_index"),
                                .label_smoothing = c.num("smoothing"),
                                .class_weights = refValues(c.tensor("weight"))});
  RETURN_IF_ERROR(b.status());
  g->setOutputs({loss.value()});
  return absl::OkStatus();
}

/// x [N, F] -> linear -> a pointwise loss (mean) against the target; bce_with_logits'
/// pos_weight is a buffer variable the test writes.
absl::Status buildRegressionStep(Builder& b, ir::Graph* g, bool training, const RefCase& c) {
  const int64_t n = c.integer("batch"), f = c.integer("width"), k = c.integer("outputs");
  BuilderInternals::beginGraph(b, g, training);
  Tensor x = BuilderInternals::addInput(b, "x", {ir::DType::kF32, {n, f}});
  Tensor target = BuilderInternals::addInput(b, "target", {ir::DType::kF32, {n, k}});
  Tensor y = b.linear(x, {.out_features = k, .name = "fc"});
  const std::string op(c.text("op"));
  Tensor loss;
  if (op == "mse_loss") {
    loss = b.mseLoss(y, target);
  } else if (op == "l1_loss") {
    loss = b.l1Loss(y, target);
  } else if (op == "smooth_l1_loss") {
    loss = b.smoothL1Loss(y, target, c.num("beta"));
  } else {
    Tensor pw = c.integer("has_pos_weight")
                    ? b.variable("pos_weight", {ir::DType::kF32, {k}}, ir::VarRole::kBuffer,
                                 ir::Initializer{ir::Initializer::Kind::kOnes})
                    : Tensor();
    loss = b.bceWithLogits(y, target, pw);
  }
  RETURN_IF_ERROR(b.status());
  g->setOutputs({loss.value()});
  return absl::OkStatus();
}

using StepBuilder = absl::Status (*)(Builder&, ir::Graph*, bool, const RefCase&);

absl::StatusOr<std::unique_ptr<ir::Module>> compiledLossModel(
    const RefCase& c, StepBuilder build, const std::vector<ir::Device>& devices,
    const std::vector<double>& weights, bool bf16 = false) {
  auto m = std::make_unique<ir::Module>("losses");
  Builder b = BuilderInternals::make(*m, {.batch = c.integer("batch")});
  ASSIGN_OR_RETURN(ir::Graph * init, m->addGraph(std::string(ir::kInitGraph)));
  ASSIGN_OR_RETURN(ir::Graph * train, m->addGraph(std::string(ir::kTrainGraph)));
  ASSIGN_OR_RETURN(ir::Graph * eval, m->addGraph(std::string(ir::kEvalGraph)));
  RETURN_IF_ERROR(build(b, train, true, c));
  RETURN_IF_ERROR(build(b, eval, false, c));
  for (const ir::Var& v : m->vars()) {
    ASSIGN_OR_RETURN(ir::Node * value,
                     init->create(ir::InitializeArgs{.var = v.name}.spec({.names = {v.name}})));
    RETURN_IF_ERROR(
        init->create(ir::AssignArgs{.value = value->result(), .var = v.name}.spec()).status());
  }
  passes::PipelineConfig config{
      .devices = devices, .weights = weights, .optimizer = ir::SgdConfig{.lr = c.num("lr")}};
  config.bf16 = bf16;
  backend::registerBackends();  // the targets' facts: the arena alignment
  ASSIGN_OR_RETURN(config.alignment, ir::targetAlignment(devices));
  passes::PassManager pm;
  RETURN_IF_ERROR(pm.addPipeline(passes::defaultPipeline(config)));
  RETURN_IF_ERROR(pm.run(*m));
  return m;
}

runtime::HostTensor lossHostTensor(const RefTensor& t, ir::DType dtype) {
  runtime::HostTensor h(ir::TensorType{dtype, ir::Shape(t.shape.begin(), t.shape.end())});
  for (int64_t i = 0; i < t.size(); ++i) {
    if (dtype == ir::DType::kI32)
      reinterpret_cast<int32_t*>(h.buffer.data())[i] = static_cast<int32_t>(t.values[i]);
    else
      reinterpret_cast<float*>(h.buffer.data())[i] = static_cast<float>(t.values[i]);
  }
  return h;
}

struct LossSplit {
  std::string what;
  std::vector<ir::Device> devices;
  std::vector<double> weights;
};
std::vector<LossSplit> lossSplits() {
  return {LossSplit{"1 device", cpus(1), {}}, LossSplit{"2 devices", cpus(2), {}},
          LossSplit{"3:1 split", cpus(2), {3, 1}}};
}

/// One SGD step of the case's model on each split: the loss and fc's weights after it
/// against PyTorch's, within `tolerance` of each tensor's scale.
void expectOneStepMatchesPyTorch(const RefCase& c, StepBuilder build, const char* second_input,
                                 ir::DType second_dtype, double tolerance, bool bf16 = false) {
  for (const LossSplit& s : lossSplits()) {
    SCOPED_TRACE(s.what);
    auto m = compiledLossModel(c, build, s.devices, s.weights, bf16);
    ASSERT_TRUE(m.ok()) << m.status();
    auto e = runtime::Executor::create(std::move(*m));
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_TRUE((*e)->run(ir::kInitGraph, {}).ok());
    for (size_t d = 0; d < s.devices.size(); ++d) {
      for (auto [var, ref] : {std::pair{"fc.w", "w0"}, std::pair{"fc.b", "b0"}})
        ASSERT_TRUE(
            (*e)->writeVariable(var, d, lossHostTensor(c.tensor(ref), ir::DType::kF32)).ok());
      if (c.has("pos_weight")) {
        ASSERT_TRUE((*e)->writeVariable("pos_weight", d,
                                        lossHostTensor(c.tensor("pos_weight"), ir::DType::kF32))
                        .ok());
      }
    }
    const runtime::HostTensor x = lossHostTensor(c.tensor("x"), ir::DType::kF32);
    const runtime::HostTensor y = lossHostTensor(c.tensor(second_input), second_dtype);
    auto out = (*e)->run(ir::kTrainGraph, {x.view(), y.view()});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_LE(
        relativeError(std::vector<float>{static_cast<float>((*out)[0].scalar())}, c.tensor("loss")),
        tolerance);
    for (size_t d = 0; d < s.devices.size(); ++d)
      for (auto [var, ref] : {std::pair{"fc.w", "w1"}, std::pair{"fc.b", "b1"}}) {
        auto v = (*e)->readVariable(var, d);
        ASSERT_TRUE(v.ok()) << v.status();
        const std::vector<float> got(v->f32(), v->f32() + v->type.numElements());
        EXPECT_LE(relativeError(got, c.tensor(ref)), tolerance) << var << " on device " << d;
      }
  }
}

// PyTorch sums the tokens' terms in its own order: a few f32 roundings of each tensor's
// scale, 1e-5 relative; a per-device mean averaged would miss the loss by the devices'
// different counts (tens of percent here), a static divisor by the ignored share.
TEST(LossTraining, SequenceCrossEntropyWithIgnoredTokensAndWeightsOnAnySplit) {
  expectOneStepMatchesPyTorch(lossReference("sequence_model"), buildSequenceStep, "labels",
                              ir::DType::kI32, 1e-5);
}

TEST(LossTraining, RegressionLossesOnAnySplit) {
  for (const char* name :
       {"regression_mse", "regression_l1", "regression_smooth_l1", "regression_bce"}) {
    SCOPED_TRACE(name);
    expectOneStepMatchesPyTorch(lossReference(name), buildRegressionStep, "target", ir::DType::kF32,
                                1e-5);
  }
}

// Under mixed precision (bf16 activations) the losses stay f32 (full_precision: their bf16
// operands are cast up), as PyTorch's autocast keeps them: the step is PyTorch's f32 one
// within bf16's rounding of the linear layer (2^-8 relative, a few of them).
TEST(LossTraining, LossesStayF32UnderMixedPrecision) {
  for (const char* name : {"regression_mse", "regression_bce"}) {
    SCOPED_TRACE(name);
    const RefCase c = lossReference(name);
    auto m = compiledLossModel(c, buildRegressionStep, cpus(2), {}, /*bf16=*/true);
    ASSERT_TRUE(m.ok()) << m.status();
    for (const auto& n : (*m)->graph(ir::kTrainGraph)->nodes()) {
      if (!n->info().has(ir::kLoss)) continue;
      for (const ir::Value* v : n->operands()) {
        EXPECT_EQ(v->type().dtype, ir::DType::kF32) << n->describe();
      }
    }
    expectOneStepMatchesPyTorch(c, buildRegressionStep, "target", ir::DType::kF32, 2e-2,
                                /*bf16=*/true);
  }
}

// The count a mean divides by is all-reduced between target_weight_sum and every reader,
// on every device, in both steps.
TEST(LossTraining, TheTotalIsSummedOverTheDevicesBeforeTheLossReadsIt) {
  const RefCase c = lossReference("sequence_model");
  auto m = compiledLossModel(c, buildSequenceStep, cpus(2), {3, 1});
  ASSERT_TRUE(m.ok()) << m.status();
  for (absl::string_view graph : {ir::kTrainGraph, ir::kEvalGraph}) {
    SCOPED_TRACE(graph);
    const ir::Graph& g = *(*m)->graph(graph);
    const auto users = g.users();
    int sums = 0;
    for (const auto& n : g.nodes()) {
      if (!ir::TargetWeightSumView::is(*n)) continue;
      ++sums;
      auto it = users.find(n->result());
      ASSERT_NE(it, users.end());
      for (const ir::Node* u : it->second)
        EXPECT_EQ(u->op(), ir::Op::kAllReduce) << u->describe() << " reads " << n->describe();
    }
    EXPECT_EQ(sums, 2) << "one per device";
    for (const auto& n : g.nodes())
      if (ir::SoftmaxCrossEntropyView::is(*n)) {
        const ir::Value* total = ir::SoftmaxCrossEntropyView(*n).total();
        ASSERT_NE(total, nullptr);
        EXPECT_EQ(total->def()->op(), ir::Op::kAllReduce);
      }
  }
  // The weighted loss (weight told by `weighted`, then the total) round-trips as text.
  const std::string text = ir::printModule(**m);
  auto again = ir::parseModule(text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ir::printModule(**again), text);
}

}  // namespace
}  // namespace tandem::testing
