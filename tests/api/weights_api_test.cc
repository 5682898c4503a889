// Model::weights and Model::setWeights (Keras's get_weights and set_weights): every trained
// parameter by name as host bytes, read from the first device and written to every device.
// The oracle is a known function: the weights of the exact affine map y = w . x + b give
// a loss of (almost) zero on every device's share of the batch, and other weights do not.

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tandem/tandem.h"
#include "tests/api/api_test_data.h"

namespace tandem::testing {
namespace {

constexpr const float* kExactW = AffineExamples::kW;
constexpr float kExactB = AffineExamples::kB;

// Two devices, so that a weight written to the first device only would show.
absl::StatusOr<Model> twoDeviceModel() {
  return Model::create(affineRegression(), {.devices = "cpu:0,cpu:1", .batch = 32, .epochs = 1},
                       Data::fromDatasets(std::make_shared<AffineExamples>(256),
                                          std::make_shared<AffineExamples>(64, 1000)));
}

std::vector<Weight> exactWeights() {
  return {Weight::ofF32("fc.w", {1, 4}, {kExactW[0], kExactW[1], kExactW[2], kExactW[3]}),
          Weight::ofF32("fc.b", {1}, {kExactB})};
}

TEST(WeightsApi, AreEveryParameterByNameAsDrawn) {
  absl::StatusOr<Model> model = twoDeviceModel();
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<Weight>> w = model->weights();
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0].name, "fc.w");
  EXPECT_EQ((*w)[0].dtype, ir::DType::kF32);
  EXPECT_EQ((*w)[0].shape, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ((*w)[0].bytes.size(), 16u);
  EXPECT_EQ((*w)[1].name, "fc.b");
  EXPECT_EQ((*w)[1].shape, (std::vector<int64_t>{1}));
  // nn.Linear's bias starts at zero, its weight drawn (Kaiming): not all zero.
  EXPECT_EQ((*w)[1].f32(), std::vector<float>{0.0f});
  EXPECT_THAT((*w)[0].f32(), ::testing::Contains(::testing::Ne(0.0f)));
  // The same seed draws the same values.
  absl::StatusOr<Model> again = twoDeviceModel();
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<std::vector<Weight>> w2 = again->weights();
  ASSERT_TRUE(w2.ok()) << w2.status();
  EXPECT_EQ((*w2)[0].bytes, (*w)[0].bytes);
}

// Written to every device: the evaluation (half the batch on each device) and a training
// epoch (each device's gradient, all-reduced) both see the exact map's loss of ~0.
TEST(WeightsApi, SetWeightsWritesEveryDevice) {
  absl::StatusOr<Model> model = twoDeviceModel();
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Metrics> drawn = model->evaluate();
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  EXPECT_GT(drawn->loss, 0.1);

  ASSERT_TRUE(model->setWeights(exactWeights()).ok());
  absl::StatusOr<std::vector<Weight>> w = model->weights();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)[0].f32(), exactWeights()[0].f32());
  EXPECT_EQ((*w)[1].f32(), exactWeights()[1].f32());
  absl::StatusOr<Metrics> exact = model->evaluate();
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->examples, 64);
  EXPECT_LT(exact->loss, 1e-10);

  absl::StatusOr<std::vector<EpochMetrics>> h = model->fit();
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 1u);
  EXPECT_LT((*h)[0].train_loss, 1e-10);
  EXPECT_LT((*h)[0].test_loss, 1e-10);
}

// A mistake names the weight and what differs; nothing is written, not even the weights
// before it in the list.
TEST(WeightsApi, MistakesNameTheWeightAndWriteNothing) {
  absl::StatusOr<Model> model = twoDeviceModel();
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<Weight>> before = model->weights();
  ASSERT_TRUE(before.ok()) << before.status();

  Weight unknown = Weight::ofF32("fc.weight", {1, 4}, {1, 2, 3, 4});
  Weight transposed = Weight::ofF32("fc.w", {4, 1}, {1, 2, 3, 4});
  Weight integers = exactWeights()[0];
  integers.dtype = ir::DType::kI32;
  Weight short_bytes = exactWeights()[0];
  short_bytes.bytes.resize(12);
  const struct {
    std::vector<Weight> weights;
    std::string message;
  } cases[] = {
      {{exactWeights()[1], unknown},
       "Model::setWeights: 'fc.weight' is not a parameter of model affine (Model::weights "
       "lists them)"},
      {{exactWeights()[1], transposed},
       "Model::setWeights: 'fc.w' is f32[4,1], but model affine has it as f32[1,4]"},
      {{exactWeights()[1], integers},
       "Model::setWeights: 'fc.w' is i32[1,4], but model affine has it as f32[1,4]"},
      {{exactWeights()[1], short_bytes},
       "Model::setWeights: 'fc.w' holds 12 bytes, but f32[1,4] is 16"},
      {{exactWeights()[1], exactWeights()[1]}, "Model::setWeights: 'fc.b' is given twice"},
  };
  for (const auto& c : cases) {
    const absl::Status s = model->setWeights(c.weights);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), c.message);
  }
  absl::StatusOr<std::vector<Weight>> after = model->weights();
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), before->size());
  for (size_t k = 0; k < after->size(); ++k) EXPECT_EQ((*after)[k].bytes, (*before)[k].bytes);
}

}  // namespace
}  // namespace tandem::testing
