// Model::predict (issue 42): a model's per-example outputs over any number of examples,
// forward only, batched over the model's devices: a classifier's logits whose arg-max is
// the accuracy evaluate() counts, the same after save and load, and bad inputs named.

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "runtime/data/npy_format.h"
#include "tandem/tandem.h"
#include "tests/test_util.h"
#include "tests/api/api_test_data.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

constexpr int kClasses = kQuadrantClasses;

// Batch norm, so that inference mode (running statistics) matters.
Tensor smallNet(Builder& b, Tensor x) {
  x = b.relu(b.batchNorm(b.conv2d(x, {.out_channels = 4, .kernel = 3, .pad = 1, .name = "conv"}),
                         {.name = "bn"}));
  return b.linear(b.flatten(x), {.out_features = kClasses, .name = "fc"});
}

ModelSpec spec() { return classifierModel("quadrant_net", {1, 8, 8}, kClasses, smallNet); }

Model trained(const std::string& checkpoint = "") {
  TrainConfig config{.devices = "cpu:0,cpu:1", .batch = 16, .epochs = 2};
  if (!checkpoint.empty()) config.checkpoint = checkpoint;
  absl::StatusOr<Model> m =
      train(spec(), config, Data::fromExamples(quadrantImages(128, 1), quadrantImages(40, 2)));
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

// The logits of `count` test images: 21 is no multiple of the batch of 16.
absl::StatusOr<Arrays> logitsOf(Model& m, int count = 21) {
  Examples e = quadrantImages(count, 3);
  return m.predict({{"x", Array::floats({count, 1, 8, 8}, e.images)}});
}

TEST(PredictApi, TheLogitsOfEveryExampleCountWhatEvaluateCounts) {
  Model m = trained();
  const int count = 21;
  int64_t calls = 0;
  Examples e = quadrantImages(count, 3);
  absl::StatusOr<Arrays> out =
      m.predict({{"x", Array::floats({count, 1, 8, 8}, e.images)}}, [&](int64_t done, int64_t all) {
        EXPECT_EQ(all, 2);
        calls = done;
        return true;
      });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(calls, 2);
  ASSERT_EQ(out->size(), 1u);
  const Array logits = out->at("logits");  // a copy: `out` is assigned again below
  ASSERT_EQ(logits.shape, (std::vector<int64_t>{count, kClasses}));
  ASSERT_EQ(logits.f32.size(), size_t{count * kClasses});
  int correct = 0;
  for (int i = 0; i < count; ++i) {
    const float* row = logits.f32.data() + i * kClasses;
    int best = 0;
    for (int j = 1; j < kClasses; ++j)
      if (row[j] > row[best]) best = j;
    correct += best == e.labels[size_t(i)];
  }
  absl::StatusOr<Metrics> evaluated = m.evaluate(e);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_EQ(evaluated->examples, count);
  EXPECT_DOUBLE_EQ(evaluated->accuracy, double(correct) / count);
  // The labels may come along, as in evaluate's examples: they are not read.
  out = m.predict(
      {{"x", Array::floats({count, 1, 8, 8}, e.images)}, {"y", Array::ints({count}, e.labels)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("logits").f32, logits.f32);
}

TEST(PredictApi, ASavedAndLoadedModelPredictsTheSame) {
  TempDir dir;
  Model m = trained();
  ASSERT_TRUE(m.save(dir.file("ck")).ok());
  absl::StatusOr<Arrays> before = logitsOf(m);
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<Model> loaded = Model::load(
      spec(), {.devices = "cpu:0,cpu:1", .batch = 16, .epochs = 2},
      Data::fromExamples(quadrantImages(128, 1), quadrantImages(40, 2)), dir.file("ck"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::StatusOr<Arrays> after = logitsOf(*loaded);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->at("logits").f32, before->at("logits").f32);
}

// A model whose labels are i64 (issue 42) trains on i32 labels (widened as they are
// read) and predicts from integers given for its i64 input: here the labels themselves,
// which its prediction returns through the graph's cast to i32.
TEST(PredictApi, AnI64InputTakesIntegerValues) {
  ModelSpec s = spec();
  ASSERT_EQ(s.inputs[1].name, "y");
  s.inputs[1].dtype = ir::DType::kI64;
  s.predict->inputs = {"x", "y"};
  s.predict->outputs = {"logits", "label"};
  s.predict->forward = [](Builder& b, const StepInputs& in) {
    return std::vector<Prediction>{{.name = "logits", .value = smallNet(b, in["x"])},
                                   {.name = "label", .value = in["y"]}};
  };
  absl::StatusOr<Model> m =
      train(s, {.devices = "cpu:0,cpu:1", .batch = 16, .epochs = 1},
            Data::fromExamples(quadrantImages(128, 1), quadrantImages(40, 2)));
  ASSERT_TRUE(m.ok()) << m.status();
  const int count = 21;
  Examples e = quadrantImages(count, 3);
  absl::StatusOr<Arrays> out = m->predict(
      {{"x", Array::floats({count, 1, 8, 8}, e.images)}, {"y", Array::ints({count}, e.labels)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("label").i32, e.labels);
  EXPECT_EQ(out->at("logits").shape, (std::vector<int64_t>{count, kClasses}));
}

TEST(PredictApi, BadInputsAreNamed) {
  Model m = trained();
  auto error = [&](const Arrays& inputs) {
    absl::StatusOr<Arrays> out = m.predict(inputs);
    return out.ok() ? std::string("(no error)") : std::string(out.status().message());
  };
  EXPECT_EQ(error({}),
            "Model::predict: model quadrant_net predicts from input 'x' (f32[count,1,8,8]), which "
            "`inputs` does not give");
  EXPECT_EQ(error({{"images", Array::floats({1, 1, 8, 8}, std::vector<float>(64))}}),
            "Model::predict: input 'images' is not one of model quadrant_net's (x: f32[1,8,8], "
            "y: i32[])");
  EXPECT_EQ(error({{"x", Array::floats({2, 1, 9, 9}, std::vector<float>(162))}}),
            "Model::predict: input 'x' is [2,1,9,9], but model quadrant_net takes "
            "f32[count,1,8,8]");
  EXPECT_EQ(error({{"x", Array::ints({1, 1, 8, 8}, std::vector<int32_t>(64))}}),
            "Model::predict: input 'x' holds i32 values, but model quadrant_net takes "
            "f32[count,1,8,8]");
  EXPECT_NE(
      error({{"x", Array::floats({2, 1, 8, 8}, std::vector<float>(64))}}).find("Model::predict: "),
      std::string::npos);
}

TEST(PredictApi, TandemPredictOfItsCheckpointGivesItsLogits) {
  // A zoo LeNet made for 4 classes (a checkpoint does not record them: tandem predict
  // reads them off the weights), saved, and predicted by the CLI on the same devices and
  // batch: the API's logits, bit for bit.
  const ModelSpec lenet4 = zoo::lenet({.image_shape = {1, 28, 28}, .classes = 4});
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> pixel(0, 1);
  Examples train_set, test_set;
  for (Examples* e : {&train_set, &test_set})
    for (int i = 0; i < 32; ++i) {
      for (int p = 0; p < 28 * 28; ++p) e->images.push_back(pixel(gen));
      e->labels.push_back(i % kClasses);
    }
  const TrainConfig config{.devices = "cpu:0,cpu:1", .batch = 16, .epochs = 1};
  absl::StatusOr<Model> m = train(lenet4, config, Data::fromExamples(train_set, test_set));
  ASSERT_TRUE(m.ok()) << m.status();
  TempDir dir;
  ASSERT_TRUE(m->save(dir.file("ck")).ok());
  const int count = 21;
  std::vector<float> images(test_set.images.begin(), test_set.images.begin() + count * 28 * 28);
  absl::StatusOr<Arrays> api = m->predict({{"x", Array::floats({count, 1, 28, 28}, images)}});
  ASSERT_TRUE(api.ok()) << api.status();

  std::string npy = *runtime::data::npyFileHeader(ir::DType::kF32, {count, 1, 28, 28});
  npy.append(reinterpret_cast<const char*>(images.data()), images.size() * sizeof(float));
  dir.write("x.npy", npy);
  CommandResult r =
      runTandem({"predict", "--checkpoint", dir.file("ck"), "--input", "x=" + dir.file("x.npy"),
                 "-o", dir.file("out.npy"), "--batch", "16", "--devices", "cpu:0,cpu:1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = readFile(dir.file("out.npy"));
  auto header = runtime::data::parseNpyHeader(out);
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->shape, (std::vector<int64_t>{count, kClasses}));
  std::vector<float> cli(size_t(count * kClasses));
  std::memcpy(cli.data(), out.data() + header->data_offset, cli.size() * sizeof(float));
  EXPECT_EQ(cli, api->at("logits").f32);
}

}  // namespace
}  // namespace tandem::testing
