// Prediction (issue 42): the forward-only module (frontend/build_module.h's
// buildPredictModule, compiled by training::compilePrediction) run over a source of
// examples by runtime::Predictor: every example's outputs in the source's order, on any
// split of the batch, the last batch's padding dropped.

#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/predict_graph.h"
#include "runtime/data/memory_source.h"
#include "runtime/data/npy_format.h"
#include "runtime/data/open_source.h"
#include "runtime/predictor.h"
#include "tests/runtime/runtime_test_util.h"
#include "train/compile.h"

namespace tandem::testing {
namespace {

constexpr int64_t kImages = 13;  // not a multiple of the batch: the last batch is padded

// Deterministic values for every variable the prediction reads (running variances > 0).
std::map<std::string, std::vector<float>> someValues(const ir::Module& m) {
  std::mt19937 rng(7);
  std::map<std::string, std::vector<float>> out;
  for (const ir::Var& v : m.vars()) {
    std::vector<float>& values = out[v.name];
    const bool variance = absl::EndsWith(v.name, "running_var");
    std::uniform_real_distribution<float> dist(variance ? 0.5f : -0.2f, variance ? 1.5f : 0.2f);
    values.resize(static_cast<size_t>(v.type.numElements()));
    for (float& x : values) x = dist(rng);
  }
  return out;
}

std::unique_ptr<runtime::data::ExampleSource> images(int64_t count) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> x(static_cast<size_t>(count * 28 * 28));
  for (float& p : x) p = pixel(rng);
  auto source = runtime::data::MemorySource::create(
      {runtime::data::HostArray::of("x", std::move(x), {count, 1, 28, 28})});
  EXPECT_TRUE(source.ok()) << source.status();
  return std::move(*source);
}

// The logits of lenet-bn (batch norm on running statistics) over `count` images, with a
// global batch of `batch` on `devices`.
std::vector<float> predictLogits(int64_t batch, int devices, int64_t count = kImages) {
  const ModelSpec spec = zoo::lenetBn();
  passes::PipelineConfig pipeline;
  pipeline.devices = cpus(devices);
  auto module = training::compilePrediction(spec, batch, pipeline);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  const auto values = someValues(**module);
  auto p = runtime::Predictor::create(std::move(*module), spec.predict->outputs);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  for (const auto& [name, v] : values) {
    runtime::HostTensor t((*p)->module().findVar(name)->type);
    std::memcpy(t.buffer.data(), v.data(), v.size() * sizeof(float));
    EXPECT_TRUE((*p)->setVariable(name, t).ok());
  }
  auto source = images(count);
  auto out = (*p)->predict(*source);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "logits");
  EXPECT_EQ(ir::toString((*out)[0].value.type), absl::StrCat("f32[", count, ",10]"));
  const float* f = (*out)[0].value.f32();
  return std::vector<float>(f, f + count * 10);
}

void expectNear(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "element " << i;
}

TEST(Predict, EveryExampleInOrderWhateverTheBatchAndTheSplit) {
  // One example per batch is each example alone: a prediction by the batch of 8 on one
  // device, 3 devices (3, 3, 2 rows) or 2 devices (a batch of 5: 3, 2) gives each row the
  // logits of its own example, with the padding of the last batch dropped.
  const std::vector<float> alone = predictLogits(1, 1);
  ASSERT_EQ(alone.size(), size_t{kImages * 10});
  expectNear(predictLogits(8, 1), alone);
  expectNear(predictLogits(8, 3), alone);
  expectNear(predictLogits(5, 2), alone);
}

TEST(Predict, TheModuleHoldsTheForwardAndItsVariablesOnly) {
  passes::PipelineConfig pipeline;
  pipeline.devices = cpus(2);
  auto m = training::compilePrediction(zoo::lenetBn(), 8, pipeline);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->graphs().size(), 1u);
  const ir::Graph& g = *(*m)->graph(ir::kPredictGraph);
  for (const auto& n : g.nodes())
    if (n->info().has(ir::kCollective)) {
      EXPECT_TRUE(ir::SplitView::is(*n)) << n->describe();
    }
  for (const ir::Var& v : (*m)->vars())
    EXPECT_TRUE(v.role == ir::VarRole::kParam || v.role == ir::VarRole::kBuffer) << v.name;
  // Each device returns its own rows: 4 and 4 of the batch of 8.
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(ir::toString(g.outputs()[0]->type()), "f32[4,10]");
  EXPECT_EQ(ir::toString(g.outputs()[1]->type()), "f32[4,10]");
}

TEST(Predict, EveryZooModelCompilesItsPredictionOnTwoDevices) {
  // Dropout (the ViT, the MLP) makes no node in inference, and its step counter is not a
  // variable of the prediction; batch norm folds into the convolutions (fuse-conv-bn-relu).
  for (const std::string& name : zoo::modelNames()) {
    auto spec = zoo::modelByName(name);
    ASSERT_TRUE(spec.ok()) << spec.status();
    passes::PipelineConfig pipeline;
    pipeline.devices = cpus(2);
    auto m = training::compilePrediction(*spec, 3, pipeline);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ((*m)->findVar(ir::kStepVar), nullptr) << name;
    for (const auto& n : (*m)->graph(ir::kPredictGraph)->nodes()) {
      EXPECT_NE(n->op(), ir::Op::kDropout) << name;
      EXPECT_NE(n->op(), ir::Op::kBatchNorm) << name << ": " << n->describe();
    }
  }
}

TEST(Predict, UnderMixedPrecisionTheOutputsKeepTheirDeclaredDtype) {
  // The forward computes in bf16 as the run that trained in bf16 evaluated; the logits it
  // returns are cast back to the f32 the model declares (a .npy of f32, an accuracy).
  passes::PipelineConfig pipeline;
  pipeline.devices = cpus(2);
  pipeline.bf16 = true;
  auto m = training::compilePrediction(zoo::lenetBn(), 8, pipeline);
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Graph& g = *(*m)->graph(ir::kPredictGraph);
  ASSERT_EQ(g.outputs().size(), 2u);
  for (const ir::Value* out : g.outputs()) {
    EXPECT_EQ(ir::toString(out->type()), "f32[4,10]");
    EXPECT_EQ(out->def()->op(), ir::Op::kCast) << out->def()->describe();
  }
}

TEST(Predict, AStopAfterABatchKeepsWhatWasPredicted) {
  passes::PipelineConfig pipeline;
  auto m = training::compilePrediction(zoo::lenet(), 8, pipeline);
  ASSERT_TRUE(m.ok()) << m.status();
  auto p = runtime::Predictor::create(std::move(*m), {"logits"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto source = images(kImages);
  int calls = 0;
  auto out = (*p)->predict(*source, [&](const runtime::data::Batch& b, int64_t batches) {
    EXPECT_EQ(batches, 2);
    EXPECT_EQ(b.valid, 8);
    return ++calls < 1;
  });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ir::toString((*out)[0].value.type), "f32[8,10]");
}

TEST(Predict, DataOfAnotherShapeIsRefusedNamingWhatTheModelTakes) {
  auto m = training::compilePrediction(zoo::lenet(), 8, {});
  ASSERT_TRUE(m.ok()) << m.status();
  auto p = runtime::Predictor::create(std::move(*m), {"logits"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto source = runtime::data::MemorySource::create(
      {runtime::data::HostArray::of("x", std::vector<float>(2 * 32 * 32), {2, 1, 32, 32})},
      "small");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ((*p)->predict(**source).status().message(),
            "small holds examples of x: f32[1,32,32], but lenet predicts from x: f32[1,28,28]");
  auto other = runtime::data::MemorySource::create(
      {runtime::data::HostArray::of("images", std::vector<float>(28 * 28), {1, 1, 28, 28})},
      "other");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*p)->predict(**other).status().message(),
            "other holds images: f32[1,28,28], but lenet predicts from x: f32[1,28,28], which "
            "none of them is");
}

TEST(Predict, TheFilesADataSpecReadsForTheOutputToBeClaimedAgainst) {
  using runtime::data::filesOfSpec;
  using V = std::vector<std::string>;
  EXPECT_EQ(filesOfSpec("npy:/d/x.npy"), V{"/d/x.npy"});
  EXPECT_EQ(filesOfSpec("npy:x=/d/x.npy,y=/d/y.npy"), (V{"/d/x.npy", "/d/y.npy"}));
  EXPECT_EQ(filesOfSpec("npz:/d/a.npz"), V{"/d/a.npz"});
  EXPECT_EQ(filesOfSpec("npz:/d/a:b.npz:x=images,y=labels"), V{"/d/a:b.npz"});
  EXPECT_EQ(filesOfSpec("tokens:/d/t.bin:u16:length=8"), V{"/d/t.bin"});
  EXPECT_EQ(filesOfSpec("fashion-mnist:/d"),
            (V{"/d/train-images-idx3-ubyte.gz", "/d/train-images-idx3-ubyte",
               "/d/train-labels-idx1-ubyte.gz", "/d/train-labels-idx1-ubyte",
               "/d/t10k-images-idx3-ubyte.gz", "/d/t10k-images-idx3-ubyte",
               "/d/t10k-labels-idx1-ubyte.gz", "/d/t10k-labels-idx1-ubyte"}));
  EXPECT_EQ(filesOfSpec("fashion-mnist").front(),
            "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
  EXPECT_EQ(filesOfSpec("images:/d"), V{});
}

TEST(Predict, TheNpyHeaderItWritesIsOneNumpyAndTheSourcesRead) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{3, 10}, std::vector<int64_t>{7}, std::vector<int64_t>{2, 1, 28, 28}}) {
    absl::StatusOr<std::string> header = runtime::data::npyFileHeader(ir::DType::kI32, shape);
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->size() % 64, 0u);  // numpy's alignment of the data
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    auto parsed = runtime::data::parseNpyHeader(*header + std::string(size_t(elements * 4), '\0'));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->shape, shape);
    EXPECT_EQ(parsed->dtype.descr, "<i4");
    EXPECT_EQ(parsed->data_offset, static_cast<int64_t>(header->size()));
  }
  EXPECT_EQ(*runtime::data::npyFileHeader(ir::DType::kF32, {7}),
            std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                "{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }" + std::string(60, ' ') +
                "\n");
  EXPECT_EQ(runtime::data::npyFileHeader(ir::DType::kBF16, {7}).status().message(),
            "numpy has no type for bf16 elements");
}

}  // namespace
}  // namespace tandem::testing
