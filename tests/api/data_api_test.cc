// The public API's data (issue 42): specs as `tandem train --data` reads them, and data sets
// of a program's own (tandem::Dataset) for a model that is not a classifier.

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tandem/tandem.h"
#include "tests/api/api_test_data.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kDigitsCsv[] = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

std::string whyNoDigits() {
  return ::access(kDigitsCsv, R_OK) == 0
             ? ""
             : absl::StrCat(kDigitsCsv, " is missing (Debian python3-sklearn)");
}

// scikit-learn's digits written to an .npz in `dir`, a fifth held out for validation.
Data digitsData(const TempDir& dir) {
  const CommandResult wrote =
      runProgram("/usr/bin/python3",
                 {sourcePath("tests/runtime/write_digits_npz.py"), kDigitsCsv, dir.file("d.npz")});
  EXPECT_EQ(wrote.exit_code, 0) << wrote.err;
  Data data = Data::fromSpec("npz:" + dir.file("d.npz"));
  data.val_fraction = 0.2;
  return data;
}

TEST(DataApi, ADatasetOfTheProgramsOwnTrainsARegression) {
  const Data data = Data::fromDatasets(std::make_shared<AffineExamples>(512),
                                       std::make_shared<AffineExamples>(128, 1000));
  absl::StatusOr<Model> model =
      train(affineRegression(), {.devices = "cpu:0,cpu:1", .batch = 32, .epochs = 5}, data);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<EpochMetrics>& h = model->history();
  ASSERT_EQ(h.size(), 5u);
  // The exact linear function is learnt: the test loss falls to almost nothing.
  EXPECT_LT(h.back().test_loss, 1e-3) << h.front().test_loss;
  EXPECT_LT(h.back().test_loss, h.front().test_loss / 100);
  // Each epoch carries the model's own metric, by name, for both passes.
  for (const EpochMetrics& e : h) {
    ASSERT_EQ(e.train_metrics.size(), 1u) << "epoch " << e.epoch;
    ASSERT_EQ(e.test_metrics.size(), 1u) << "epoch " << e.epoch;
    EXPECT_EQ(e.train_metrics[0].first, "abs_error");
    EXPECT_EQ(e.test_metrics[0].first, "abs_error");
  }
  EXPECT_LT(h.back().test_metrics[0].second, h.front().test_metrics[0].second / 10);
  // The last epoch's test figures are an evaluation of the test examples.
  absl::StatusOr<Metrics> again = model->evaluate(AffineExamples(128, 1000));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->loss, h.back().test_loss);
  EXPECT_EQ(again->metrics, h.back().test_metrics);
  absl::StatusOr<Metrics> m = model->evaluate(AffineExamples(64, 5000));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->examples, 64);
  EXPECT_LT(m->loss, 1e-3);
  ASSERT_EQ(m->metrics.size(), 1u);
  EXPECT_EQ(m->metrics[0].first, "abs_error");
  // The mean |error| is at most the root of the mean squared error (Jensen), and above 0.
  EXPECT_GT(m->metrics[0].second, 0);
  EXPECT_LE(m->metrics[0].second, std::sqrt(m->loss) * (1 + 1e-6));
}

// Without class labels nothing marks a padded last batch's rows, which the sums would
// count: such data is refused, naming the batch that would divide it.
TEST(DataApi, UnlabelledDataThatDoesNotFillItsLastBatchIsRefused) {
  const Data data = Data::fromDatasets(std::make_shared<AffineExamples>(512),
                                       std::make_shared<AffineExamples>(100, 1000));
  absl::StatusOr<Model> model =
      Model::create(affineRegression(), {.devices = "cpu:0,cpu:1", .batch = 32, .epochs = 1}, data);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(),
              HasSubstr("AffineExamples holds 100 examples, not a multiple of the batch 32"));
}

TEST(DataApi, DataGivenTwoWaysOrHalfGivenIsRefused) {
  Data both = Data::fromSpec("npz:/nonexistent.npz");
  both.fashion_mnist = "/usr/share/datasets/fashion-mnist";
  absl::StatusOr<Model> m = Model::create(affineRegression(), {.epochs = 1}, both);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("Data: give one of spec, fashion_mnist"));
  const Data half = Data::fromDatasets(std::make_shared<AffineExamples>(64), nullptr);
  m = Model::create(affineRegression(), {.epochs = 1}, half);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("Data::test_set is not given"));
  Data no_test = Data::fromSpec("npz:/nonexistent.npz");
  m = Model::create(affineRegression(), {.epochs = 1}, no_test);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent.npz"));
}

// A spec as `tandem train --data` takes it, with a validation fraction: the CLI's figures.
TEST(DataApi, ASpecTrainsAsTheCliDoes) {
  TANDEM_NEED_INSTALLED(whyNoDigits());
  TempDir dir;
  Data data = digitsData(dir);
  const ModelSpec spec = classifierModel("digits_mlp", {1, 8, 8}, 10, [](Builder& b, Tensor x) {
    x = b.relu(b.linear(b.flatten(x), {.out_features = 32, .name = "fc1"}));
    return b.linear(x, {.out_features = 10, .name = "fc2"});
  });
  absl::StatusOr<Model> model = train(spec, {.devices = "cpu:0,cpu:1", .epochs = 3}, data);
  ASSERT_TRUE(model.ok()) << model.status();
  // 359 validation examples (a fifth of 1,797), at the batch chosen for so few training
  // examples (64, 22 steps an epoch).
  absl::StatusOr<Metrics> m = model->evaluate();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->examples, 359);
  EXPECT_GT(m->accuracy, 0.8);
  ASSERT_EQ(m->metrics.size(), 1u);
  EXPECT_EQ(m->metrics[0].first, "accuracy");
  EXPECT_EQ(m->metrics[0].second, m->accuracy);
}

// A classifier that declares its labels i64, as PyTorch keeps them, trains on the digits'
// int64 labels exactly as one that declares them i32 (issue 42): the loader widens the
// source's labels for the i64 input, and the graph casts them back to i32 after the split.
TEST(DataApi, I64LabelsTrainAsI32Ones) {
  TANDEM_NEED_INSTALLED(whyNoDigits());
  TempDir dir;
  Data data = digitsData(dir);
  ModelSpec spec = classifierModel("digits_mlp", {1, 8, 8}, 10, [](Builder& b, Tensor x) {
    return b.linear(b.flatten(x), {.out_features = 10, .name = "fc"});
  });
  absl::StatusOr<Model> i32 = train(spec, {.devices = "cpu:0,cpu:1", .epochs = 2}, data);
  ASSERT_TRUE(i32.ok()) << i32.status();
  ASSERT_EQ(spec.inputs[1].name, "y");
  spec.inputs[1].dtype = ir::DType::kI64;
  absl::StatusOr<Model> i64 = train(spec, {.devices = "cpu:0,cpu:1", .epochs = 2}, data);
  ASSERT_TRUE(i64.ok()) << i64.status();
  ASSERT_EQ(i64->history().size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(i64->history()[e].train_loss, i32->history()[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(i64->history()[e].test_loss, i32->history()[e].test_loss) << "epoch " << e + 1;
    EXPECT_EQ(i64->history()[e].test_accuracy, i32->history()[e].test_accuracy);
  }
  EXPECT_GT(i64->history().back().test_accuracy, 0.5);
}

}  // namespace
}  // namespace tandem::testing
