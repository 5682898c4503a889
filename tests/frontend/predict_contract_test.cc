// The prediction a model declares (ModelSpec::predict, issue 42): per-example outputs
// from some of its inputs, built forward only in inference mode into a module of its own
// (buildPredictModule) that holds the variables the forward reads and nothing else.

#include <string>

#include "frontend/build_module.h"
#include "frontend/model.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/predict_graph.h"
#include "ir/printer.h"

namespace tandem {
namespace {

// A regression on token ids and a per-example weight: it predicts `score` ([N, 1]) and
// `hidden` ([N, 3]) from the ids alone.
ModelSpec scoreModel() {
  ModelSpec spec{.name = "scores",
                 .inputs = {{.name = "ids", .dtype = ir::DType::kI32, .shape = {6}},
                            {.name = "weights", .dtype = ir::DType::kF32, .shape = {1}}},
                 .step = [](Builder& b, const StepInputs& in) {
                   Tensor h = b.mean(b.embedding(in["ids"], 11, 3, "embed"), 1);
                   Tensor score = b.linear(h, {.out_features = 1, .name = "fc"});
                   return StepOutputs{.loss = b.mseLoss(score, in["weights"])};
                 }};
  spec.predict =
      PredictSpec{.inputs = {"ids"},
                  .outputs = {"score", "hidden"},
                  .forward = [](Builder& b, const StepInputs& in) {
                    Tensor h = b.mean(b.embedding(in["ids"], 11, 3, "embed"), 1);
                    return std::vector<Prediction>{
                        {.name = "score", .value = b.linear(h, {.out_features = 1, .name = "fc"})},
                        {.name = "hidden", .value = h}};
                  }};
  return spec;
}

std::string predictError(const ModelSpec& spec) {
  auto m = buildPredictModule(spec, {.batch = 4});
  return m.ok() ? "" : std::string(m.status().message());
}

TEST(PredictContract, TheDeclaredInputsInAndTheOutputsOutOverTheStepsVariables) {
  auto m = buildPredictModule(scoreModel(), {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->graphs().size(), 1u);
  const ir::Graph* g = (*m)->graph(ir::kPredictGraph);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(ir::toString(g->inputs()[0]->result()->type()), "i32[4,6]");
  ASSERT_EQ(g->outputs().size(), 2u);
  EXPECT_EQ(ir::toString(g->outputs()[0]->type()), "f32[4,1]");
  EXPECT_EQ(ir::toString(g->outputs()[1]->type()), "f32[4,3]");
  // The training module's variables of the same names: a checkpoint's values fit.
  auto train = buildModule(scoreModel(), {.batch = 4});
  ASSERT_TRUE(train.ok()) << train.status();
  for (const ir::Var& v : (*m)->vars()) {
    const ir::Var* same = (*train)->findVar(v.name);
    ASSERT_NE(same, nullptr) << v.name;
    EXPECT_EQ(same->type, v.type) << v.name;
  }
  // All of them here (the table, fc's weight and bias): the forward reads every one.
  EXPECT_EQ((*m)->vars().size(), (*train)->vars().size());
}

TEST(PredictContract, AClassifierPredictsItsLogitsWithBatchNormOnRunningStatistics) {
  auto m = buildPredictModule(zoo::lenetBn(), {.batch = 8});
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Graph& g = *(*m)->graph(ir::kPredictGraph);
  ASSERT_EQ(g.inputs().size(), 1u);  // the images, not the labels
  EXPECT_EQ(g.inputs()[0]->result()->name(), "x");
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(ir::toString(g.outputs()[0]->type()), "f32[8,10]");
  int batch_norms = 0;
  for (const auto& n : g.nodes()) {
    EXPECT_NE(n->op(), ir::Op::kSoftmaxCrossEntropy);
    if (ir::BatchNormView::is(*n)) {
      ++batch_norms;
      EXPECT_FALSE(ir::BatchNormView(*n).training()) << n->describe();
    }
  }
  EXPECT_EQ(batch_norms, 2);
  // Only the forward's variables: no optimizer state, and the running statistics it reads.
  for (const ir::Var& v : (*m)->vars())
    EXPECT_TRUE(v.role == ir::VarRole::kParam || v.role == ir::VarRole::kBuffer) << v.name;
  EXPECT_NE((*m)->findVar("bn1.running_var"), nullptr);
}

TEST(PredictContract, AModelWithoutAPredictionIsNamed) {
  ModelSpec spec = scoreModel();
  spec.predict.reset();
  EXPECT_EQ(predictError(spec), "model scores declares no prediction (ModelSpec::predict)");
}

TEST(PredictContract, ItsInputsAreAmongTheModelsEachOnce) {
  ModelSpec spec = scoreModel();
  spec.predict->inputs = {"tokens"};
  EXPECT_EQ(predictError(spec),
            "model scores: its prediction takes input 'tokens', which is not among its inputs "
            "(ids, weights)");
  spec.predict->inputs = {"ids", "ids"};
  EXPECT_EQ(predictError(spec), "model scores: its prediction takes input 'ids' twice");
  // An input of the model it does not declare is the build's error, naming those it has.
  spec.predict->inputs = {"ids"};
  spec.predict->forward = [](Builder& b, const StepInputs& in) {
    return std::vector<Prediction>{{.name = "score", .value = b.relu(in["weights"])},
                                   {.name = "hidden", .value = b.relu(in["weights"])}};
  };
  EXPECT_EQ(predictError(spec),
            "model scores: its prediction reads input 'weights', which is not among its inputs "
            "(ids)");
}

TEST(PredictContract, ItReturnsTheOutputsItDeclaresOneRowPerExample) {
  ModelSpec spec = scoreModel();
  spec.predict->outputs = {"score"};
  EXPECT_EQ(predictError(spec),
            "model scores: its prediction returns outputs (score, hidden) but it declares (score)");
  spec.predict->outputs = {"score", "score"};
  EXPECT_EQ(predictError(spec), "model scores: its prediction declares output 'score' twice");
  spec = scoreModel();
  spec.predict->forward = [](Builder& b, const StepInputs& in) {
    Tensor h = b.mean(b.embedding(in["ids"], 11, 3, "embed"), 1);
    return std::vector<Prediction>{{.name = "score", .value = b.mean(h, 0)},
                                   {.name = "hidden", .value = h}};
  };
  EXPECT_EQ(predictError(spec),
            "model scores: its prediction's output 'score' is f32[3], not one row per example "
            "of the batch (4, ...)");
  spec.predict->forward = [](Builder&, const StepInputs& in) {
    return std::vector<Prediction>{{.name = "score", .value = in["ids"]},
                                   {.name = "hidden", .value = Tensor()}};
  };
  EXPECT_EQ(predictError(spec),
            "model scores: its prediction's output 'score' is an input passed through; each "
            "output is a tensor the forward computes");
}

}  // namespace
}  // namespace tandem
