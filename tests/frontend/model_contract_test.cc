// The model contract (issue 42): named inputs of any dtype and per-example shape in, a
// scalar loss and named metrics out; classifiers are one such model, made for the images
// and classes they are given.

#include <string>

#include "frontend/build_module.h"
#include "frontend/model.h"
#include "frontend/zoo/zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/op_info.h"
#include "ir/printer.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

// A step of no classifier: token ids and a per-example weight vector in, the mean of a
// linear layer over an embedding as its "loss" (any scalar will do here), and the summed
// weights as a metric.
ModelSpec tokenModel() {
  return ModelSpec{.name = "tokens",
                   .inputs = {{.name = "ids", .dtype = ir::DType::kI32, .shape = {6}},
                              {.name = "weights", .dtype = ir::DType::kF32, .shape = {3}}},
                   .metrics = {"weight"},
                   .step = [](Builder& b, const StepInputs& in) {
                     Tensor h = b.embedding(in["ids"], 11, 3, "embed");
                     h = b.mean(b.linear(b.mean(h, 2), {.out_features = 1, .name = "fc"}), 1);
                     Tensor loss = b.reshape(b.mean(h, 0, /*keepdim=*/true), {1});
                     Tensor weight_sum = b.reshape(b.sum(b.sum(in["weights"], 1), 0, true), {1});
                     return StepOutputs{.loss = loss,
                                        .metrics = {{.name = "weight", .sum = weight_sum}}};
                   }};
}

std::string buildError(const ModelSpec& spec) {
  auto m = buildModule(spec, {.batch = 4});
  return m.ok() ? "" : std::string(m.status().message());
}

TEST(ModelContract, InputsOfAnyDtypeAndShapeBecomeTheStepsInputsInOrder) {
  auto m = buildModule(tokenModel(), {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status();
  for (const char* graph : {"train_step", "eval_step"}) {
    const ir::Graph* g = (*m)->graph(graph);
    ASSERT_EQ(g->inputs().size(), 2u) << graph;
    EXPECT_EQ(g->inputs()[0]->result()->name(), "ids");
    EXPECT_EQ(ir::toString(g->inputs()[0]->result()->type()), "i32[4,6]");
    EXPECT_EQ(ir::toString(g->inputs()[1]->result()->type()), "f32[4,3]");
    ASSERT_EQ(g->outputs().size(), 2u) << graph;  // the loss, then the metric
    EXPECT_EQ(ir::toString(g->outputs()[1]->type()), "f32[1]");
  }
}

// An i64 input (PyTorch's long ids) is the graph's i64 input, which the step reads as i32
// through one cast at the graph's start (issue 42): the index ops keep their i32 kernels.
TEST(ModelContract, AnI64InputReachesTheStepAsI32ThroughOneCast) {
  ModelSpec spec = tokenModel();
  spec.inputs[0].dtype = ir::DType::kI64;
  auto m = buildModule(spec, {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status();
  for (const char* graph : {"train_step", "eval_step"}) {
    const ir::Graph* g = (*m)->graph(graph);
    ASSERT_EQ(g->inputs().size(), 2u) << graph;
    const ir::Value* ids = g->inputs()[0]->result();
    EXPECT_EQ(ir::toString(ids->type()), "i64[4,6]") << graph;
    const auto users = g->users();
    ASSERT_EQ(users.at(ids).size(), 1u) << graph;
    const ir::Node* cast = users.at(ids)[0];
    EXPECT_EQ(cast->op(), ir::Op::kCast) << graph;
    EXPECT_EQ(ir::toString(cast->result()->type()), "i32[4,6]") << graph;
    EXPECT_EQ(users.at(cast->result())[0]->op(), ir::Op::kEmbedding) << graph;
  }
}

TEST(ModelContract, AStepThatReadsAnInputItDoesNotHaveIsNamed) {
  ModelSpec spec = tokenModel();
  spec.step = [](Builder& b, const StepInputs& in) {
    Tensor h = b.linear(in["images"], {.out_features = 1});
    return StepOutputs{.loss = h};
  };
  EXPECT_EQ(buildError(spec),
            "model tokens: its step reads input 'images', which is not among its inputs (ids, "
            "weights)");
}

TEST(ModelContract, TheLossAndEveryMetricMustBeScalars) {
  ModelSpec spec = tokenModel();
  spec.step = [](Builder&, const StepInputs& in) { return StepOutputs{.loss = in["weights"]}; };
  EXPECT_EQ(buildError(spec), "model tokens: its loss is f32[4,3], not a scalar (f32[])");
  spec.step = [](Builder& b, const StepInputs& in) {
    Tensor loss = b.reshape(b.sum(b.sum(in["weights"], 1), 0, true), {1});
    return StepOutputs{.loss = loss, .metrics = {{.name = "weight", .sum = in["ids"]}}};
  };
  EXPECT_EQ(buildError(spec),
            "model tokens: its metric 'weight' is i32[4,6], not a scalar (f32[])");
}

TEST(ModelContract, TheStepReturnsTheMetricsItDeclares) {
  ModelSpec spec = tokenModel();
  spec.metrics = {"weight", "tokens"};
  EXPECT_EQ(buildError(spec),
            "model tokens: its step returns metrics (weight) but it declares (weight, tokens)");
  spec.step = [](Builder&, const StepInputs&) { return StepOutputs{}; };
  EXPECT_EQ(buildError(spec), "model tokens: its step returned no loss");
}

TEST(ModelContract, InputsAreCheckedBeforeTheStepRuns) {
  ModelSpec twice = tokenModel();
  twice.inputs[1].name = "ids";
  EXPECT_EQ(buildError(twice), "model tokens has two inputs named 'ids'");
  ModelSpec empty = tokenModel();
  empty.inputs[0].shape = {6, 0};
  EXPECT_EQ(buildError(empty), "model tokens: input 'ids' has a dimension 0 < 1");
  ModelSpec no_inputs = tokenModel();
  no_inputs.inputs.clear();
  EXPECT_EQ(buildError(no_inputs), "model tokens needs inputs and a step function");
}

TEST(ModelContract, AClassifierIsImagesAndLabelsInLossAndAccuracyOut) {
  const ModelSpec spec = zoo::lenet();
  ASSERT_EQ(spec.inputs.size(), 2u);
  EXPECT_EQ(spec.inputs[0].name, "x");
  EXPECT_EQ(spec.inputs[0].shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(spec.inputs[1].name, "y");
  EXPECT_EQ(spec.inputs[1].dtype, ir::DType::kI32);
  EXPECT_EQ(spec.metrics, std::vector<std::string>{"accuracy"});
  ASSERT_TRUE(spec.labels.has_value());
  EXPECT_EQ(spec.labels->input, "y");
  EXPECT_EQ(spec.labels->classes, 10);
}

// Every classifier of the zoo is made for the images and classes it is given (issue 42:
// `--model resnet18` on 32x32 RGB images of 100 classes).
TEST(ModelContract, EveryZooClassifierBuildsForOtherImagesAndClasses) {
  const zoo::ImageClasses cifar100{.image_shape = {3, 32, 32}, .classes = 100};
  for (const std::string& name : zoo::modelNames()) {
    if (zoo::isLanguageModel(name)) continue;  // made for a vocabulary and a context
    auto spec = zoo::modelByName(name, cifar100);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->inputs[0].shape, cifar100.image_shape) << name;
    EXPECT_EQ(spec->labels->classes, 100) << name;
    auto m = buildModule(*spec, {.batch = 2});
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    const ir::Graph* step = (*m)->graph(ir::kTrainGraph);
    EXPECT_EQ(ir::toString(step->inputs()[0]->result()->type()), "f32[2,3,32,32]") << name;
    const ir::Node* loss = step->outputs()[0]->def();
    EXPECT_EQ(ir::toString(loss->operand(0)->type()), "f32[2,100]") << name;
  }
}

TEST(ModelContract, TheZooKeepsEachModelsOwnImagesWhenNoneAreGiven) {
  EXPECT_EQ(zoo::modelByName("resnet50")->inputs[0].shape, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(zoo::modelByName("resnet50")->labels->classes, 1000);
  EXPECT_EQ(zoo::modelByName("vit")->inputs[0].shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_THAT(std::string(zoo::modelByName("gtp").status().message()),
              HasSubstr("unknown model 'gtp'"));
  // A language model keeps its own size and vocabulary (nanoGPT's Shakespeare's 65).
  EXPECT_EQ(zoo::modelByName("gpt")->inputs[0].shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(zoo::modelByName("gpt")->labels->classes, 65);
}

}  // namespace
}  // namespace tandem
