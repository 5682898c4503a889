// Model errors are caught while the model is built: the message names the model, the
// layer's scope path, the op, the source line in the user's file and what was expected.
// After the first error the handles are poisoned: later layers do nothing, nothing
// crashes, and buildModule reports that first error only.

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "frontend/build_module.h"
#include "frontend/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

/// Builds a 1x28x28, 10-class model from `forward` at batch 8; returns the error text
/// ("" when the build succeeds).
std::string buildError(std::function<Tensor(Builder&, Tensor)> forward, int64_t batch = 8) {
  ModelSpec spec = classifierModel("broken", {1, 28, 28}, 10, std::move(forward));
  auto m = buildModule(spec, {.batch = batch});
  return m.ok() ? "" : std::string(m.status().message());
}

std::string at(int line) { return absl::StrCat("build_errors_test.cc:", line); }

TEST(BuildErrorsTest, SharedLinearGetsWrongInFeaturesFromAConvWithTheWrongKernel) {
  // Two branches share one classifier ("classifier" named twice): the second branch's
  // 5x5 conv (meant to be 3x3) leaves 4*24*24 features where the weight wants 4*26*26.
  int line = 0;
  std::string error = buildError([&](Builder& b, Tensor x) {
    auto s = b.scope("twin");
    Tensor left = b.flatten(b.conv2d(x, {.out_channels = 4, .kernel = 3, .name = "left"}));
    Tensor right = b.flatten(b.conv2d(x, {.out_channels = 4, .kernel = 5, .name = "right"}));
    Tensor l = b.linear(left, {.out_features = 10, .name = "classifier"});
    line = __LINE__ + 1;
    Tensor r = b.linear(right, {.out_features = 10, .name = "classifier"});
    return b.add(l, r);
  });
  EXPECT_EQ(
      error,
      absl::StrCat("model broken: %twin.classifier (linear) in scope twin.classifier at ", at(line),
                   ": the input has 2304 features but the weight w (%twin.classifier.w: "
                   "f32[10,2704]) expects 2704"));
}

TEST(BuildErrorsTest, AddOfMismatchedShapesNamesBothOperands) {
  int line = 0;
  std::string error = buildError([&](Builder& b, Tensor x) {
    auto s = b.scope("features");
    Tensor a = b.conv2d(x, {.out_channels = 4, .kernel = 3, .pad = 1});
    Tensor c = b.conv2d(x, {.out_channels = 4, .kernel = 3});  // forgot .pad = 1
    line = __LINE__ + 1;
    Tensor sum = b.add(a, c);
    return b.linear(b.flatten(sum), {.out_features = 10});
  });
  EXPECT_EQ(error,
            absl::StrCat("model broken: %features.add (add) in scope features.add at ", at(line),
                         ": a (%features.conv: f32[8,4,28,28]) and b (%features.conv_1: "
                         "f32[8,4,26,26]) must have the same type"));
}

TEST(BuildErrorsTest, ConvOnRankTwoTensor) {
  int line = 0;
  std::string error = buildError([&](Builder& b, Tensor x) {
    auto s = b.scope("head");
    Tensor flat = b.flatten(x);
    line = __LINE__ + 1;
    Tensor y = b.conv2d(flat, {.out_channels = 8, .kernel = 3, .name = "late_conv"});
    return b.linear(b.flatten(y), {.out_features = 10});
  });
  EXPECT_EQ(error,
            absl::StrCat("model broken: %head.late_conv (conv2d) in scope head.late_conv at ",
                         at(line), ": x (%head.flatten: f32[8,784]) must have rank 4 (N,C,H,W)"));
}

TEST(BuildErrorsTest, KernelLargerThanImage) {
  int line = 0;
  std::string error = buildError([&](Builder& b, Tensor x) {
    line = __LINE__ + 1;
    Tensor y = b.conv2d(x, {.out_channels = 8, .kernel = 30});
    return b.linear(b.flatten(y), {.out_features = 10});
  });
  EXPECT_EQ(error,
            absl::StrCat("model broken: %conv (conv2d) in scope conv at ", at(line),
                         ": a 30-wide window does not fit the height extent 28 with padding 0"));
}

TEST(BuildErrorsTest, BadLayerOptionNamesTheLayer) {
  int line = 0;
  std::string error = buildError([&](Builder& b, Tensor x) {
    auto s = b.scope("stem");
    line = __LINE__ + 1;
    Tensor y = b.conv2d(x, {.kernel = 3});  // out_channels forgotten
    return b.linear(b.flatten(y), {.out_features = 10});
  });
  EXPECT_EQ(error, absl::StrCat("model broken: layer stem.conv (conv2d) at ", at(line),
                                ": out_channels must be >= 1, got 0"));
}

TEST(BuildErrorsTest, WrongLogitsShape) {
  std::string error =
      buildError([](Builder& b, Tensor x) { return b.linear(b.flatten(x), {.out_features = 7}); });
  EXPECT_EQ(error,
            "model broken: forward returns f32[8,7] but the logits must be [8,10] "
            "(batch, classes)");
}

TEST(BuildErrorsTest, EmptyHandleFromForward) {
  EXPECT_EQ(buildError([](Builder&, Tensor) { return Tensor(); }),
            "model broken: forward returned an empty tensor handle");
}

TEST(BuildErrorsTest, EvalStepThatDisagreesWithTrainStepOnAVariable) {
  // A forward that builds a wider layer when not training: the variable already exists
  // with the training step's shape.
  int line = 0;
  std::string error = buildError([&](Builder& b, Tensor x) {
    Tensor h = b.flatten(b.avgPool2d(x, {.kernel = b.training() ? 2 : 4}));
    line = __LINE__ + 1;
    return b.linear(h, {.out_features = 10, .name = "fc"});
  });
  EXPECT_EQ(error, absl::StrCat("model broken: variable @fc.w at ", at(line),
                                " is declared as f32[10,49] but an earlier layer declared it as "
                                "f32[10,196]"));
}

TEST(BuildErrorsTest, LaterErrorsDoNotCrashAndOnlyTheFirstIsReported) {
  int first_line = 0;
  Tensor after_error, on_poisoned;
  std::string error = buildError([&](Builder& b, Tensor x) {
    first_line = __LINE__ + 1;
    Tensor bad = b.conv2d(b.flatten(x), {.out_channels = 4});  // rank-2 input
    EXPECT_FALSE(bad.valid());
    EXPECT_TRUE(bad.shape().empty());
    // Every layer kind on the poisoned handle, and a second, different mistake.
    Tensor y = b.relu(b.batchNorm(bad));
    y = b.maxPool2d(b.avgPool2d(y, {.kernel = 2}), {.kernel = 2});
    y = b.add(y, b.conv2d(x, {.out_channels = 0}));
    y = b.linear(b.flatten(b.globalAvgPool(y)), {.out_features = 10});
    on_poisoned = y;
    after_error = b.relu(x);  // even a healthy input gives nothing now
    return y;
  });
  EXPECT_THAT(error, HasSubstr(absl::StrCat("%conv (conv2d) in scope conv at ", at(first_line),
                                            ": x (%flatten: f32[8,784]) must have rank 4")));
  EXPECT_THAT(error, ::testing::Not(HasSubstr("out_channels")));
  EXPECT_FALSE(on_poisoned.valid());
  EXPECT_FALSE(after_error.valid());
}

TEST(BuildErrorsTest, BatchMustBeInRange) {
  auto ok = [](Builder& b, Tensor x) { return b.linear(b.flatten(x), {.out_features = 10}); };
  EXPECT_EQ(buildError(ok, 0), "batch size must be in [1, 2147483648], got 0");
  EXPECT_EQ(buildError(ok, -3), "batch size must be in [1, 2147483648], got -3");
  // Far larger batches would overflow byte counts; they are refused up front.
  EXPECT_EQ(buildError(ok, int64_t{1} << 62),
            "batch size must be in [1, 2147483648], got 4611686018427387904");
  EXPECT_EQ(buildError(ok, 1), "");
}

TEST(BuildErrorsTest, SpecWithoutInputsOrStep) {
  auto m = buildModule(ModelSpec{.name = "empty"}, {.batch = 4});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "model empty needs inputs and a step function");
}

TEST(BuildErrorsTest, HugeBatchKeepsFeatureCountsExact) {
  // flatten once divided the element count by the batch, which overflowed for huge
  // batches and silently shrank the linear layer's weight; the largest batch accepted
  // must keep the exact feature count.
  ModelSpec spec = classifierModel("big", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    return b.linear(b.flatten(x), {.out_features = 10, .name = "fc"});
  });
  auto m = buildModule(spec, {.batch = int64_t{1} << 31});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ir::toString((*m)->findVar("fc.w")->type), "f32[10,784]");
}

}  // namespace
}  // namespace tandem
