// softmax_cross_entropy, its backward op and accuracy against naive double-precision
// loops; the backward op also against central finite differences of the naive loss.

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

constexpr double kTolerance = 1e-5;
// The loss gradient's type, f32[]. Spelled out: kScalar trips GCC 12's maybe-uninitialized
// false positive in absl::InlinedVector's move.
const ir::TensorType kScalar{ir::DType::kF32, {}};

SingleOp::Attrs lossAttrs(const std::string& reduction, int64_t divisor) {
  return {{"reduction", ir::EnumWord{reduction}}, {"divisor", divisor}};
}

/// Sum over rows with a label >= 0 of -log softmax(row)[label], the naive way (no shift:
/// the test logits are small), divided by `scale`.
double lossRef(const std::vector<double>& logits, const int32_t* labels, int64_t rows,
               int64_t classes, double scale) {
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0) continue;
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(logits[static_cast<size_t>(r * classes + j)]);
    loss += std::log(sum) - logits[static_cast<size_t>(r * classes + labels[r])];
  }
  return loss / scale;
}

std::vector<double> toDouble(Buffer& b) { return std::vector<double>(b.f32(), b.f32() + b.size()); }

struct Case {
  int64_t rows, classes;
  std::string reduction;
  int64_t divisor;
};

class LossTest : public ::testing::TestWithParam<Case> {};

TEST_P(LossTest, ForwardMatchesReference) {
  const Case& c = GetParam();
  std::mt19937 rng(21);
  SingleOp op(ir::Op::kSoftmaxCrossEntropy, {f32({c.rows, c.classes}), i32({c.rows})},
              lossAttrs(c.reduction, c.divisor));
  op.in(0).fillUniform(rng, -4, 4);
  op.in(1).fillInts(rng, -1, static_cast<int>(c.classes - 1));  // some padding rows
  op.run();
  double scale = c.reduction == "mean" ? static_cast<double>(c.divisor) : 1.0;
  double want = lossRef(toDouble(op.in(0)), op.in(1).i32(), c.rows, c.classes, scale);
  EXPECT_LE(maxRelativeError(op.out().f32(), &want, 1), kTolerance);
}

TEST_P(LossTest, BackwardMatchesReference) {
  const Case& c = GetParam();
  std::mt19937 rng(22);
  SingleOp op(ir::Op::kSoftmaxCrossEntropyBackward,
              {f32({c.rows, c.classes}), i32({c.rows}), kScalar},
              lossAttrs(c.reduction, c.divisor));
  op.in(0).fillUniform(rng, -4, 4);
  op.in(1).fillInts(rng, -1, static_cast<int>(c.classes - 1));
  op.in(2).f32()[0] = 0.75f;
  op.run();
  double scale = 0.75 / (c.reduction == "mean" ? static_cast<double>(c.divisor) : 1.0);
  std::vector<double> want(static_cast<size_t>(c.rows * c.classes), 0.0);
  for (int64_t r = 0; r < c.rows; ++r) {
    int32_t label = op.in(1).i32()[r];
    if (label < 0) continue;
    double sum = 0;
    for (int64_t j = 0; j < c.classes; ++j)
      sum += std::exp(double(op.in(0).f32()[r * c.classes + j]));
    for (int64_t j = 0; j < c.classes; ++j) {
      double p = std::exp(double(op.in(0).f32()[r * c.classes + j])) / sum;
      want[static_cast<size_t>(r * c.classes + j)] = (p - (j == label ? 1 : 0)) * scale;
    }
  }
  EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LossTest,
                         ::testing::Values(Case{1, 10, "mean", 1}, Case{1, 3, "sum", 1},
                                           Case{7, 10, "mean", 16}, Case{128, 10, "mean", 256},
                                           Case{33, 5, "sum", 1}));

// Padding rows (negative labels) add nothing to the loss and get a zero gradient.
TEST(SoftmaxCrossEntropy, NegativeLabelsArePadding) {
  SingleOp all(ir::Op::kSoftmaxCrossEntropy, {f32({4, 3}), i32({4})}, lossAttrs("mean", 8));
  SingleOp kept(ir::Op::kSoftmaxCrossEntropy, {f32({2, 3}), i32({2})}, lossAttrs("mean", 8));
  std::mt19937 rng(23);
  all.in(0).fillUniform(rng);
  const int32_t labels[] = {2, -1, 0, -5};
  std::copy(labels, labels + 4, all.in(1).i32());
  for (int j = 0; j < 3; ++j) {
    kept.in(0).f32()[j] = all.in(0).f32()[j];
    kept.in(0).f32()[3 + j] = all.in(0).f32()[6 + j];
  }
  kept.in(1).i32()[0] = 2;
  kept.in(1).i32()[1] = 0;
  all.run();
  kept.run();
  EXPECT_FLOAT_EQ(all.out().f32()[0], kept.out().f32()[0]);

  SingleOp back(ir::Op::kSoftmaxCrossEntropyBackward, {f32({4, 3}), i32({4}), kScalar},
                lossAttrs("mean", 8));
  std::copy(all.in(0).f32(), all.in(0).f32() + 12, back.in(0).f32());
  std::copy(labels, labels + 4, back.in(1).i32());
  back.in(2).f32()[0] = 1;
  for (int j = 0; j < 12; ++j) back.out().f32()[j] = 99;  // must be overwritten
  back.run();
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(back.out().f32()[3 + j], 0.0f);
    EXPECT_EQ(back.out().f32()[9 + j], 0.0f);
    EXPECT_NE(back.out().f32()[j], 0.0f);
  }

  SingleOp none(ir::Op::kSoftmaxCrossEntropy, {f32({2, 3}), i32({2})}, lossAttrs("sum", 1));
  none.in(1).i32()[0] = none.in(1).i32()[1] = -1;
  none.run();
  EXPECT_EQ(none.out().f32()[0], 0.0f);
}

// Huge logits: the max-subtracted log-sum-exp stays finite where exp would overflow.
TEST(SoftmaxCrossEntropy, StableForLargeLogits) {
  SingleOp op(ir::Op::kSoftmaxCrossEntropy, {f32({1, 3}), i32({1})}, lossAttrs("sum", 1));
  float row[] = {1000.0f, 999.0f, -1000.0f};
  std::copy(row, row + 3, op.in(0).f32());
  op.in(1).i32()[0] = 1;
  op.run();
  double want = std::log(1 + std::exp(-1.0) + std::exp(-2000.0)) + 1.0;
  EXPECT_NEAR(op.out().f32()[0], want, 1e-6);

  SingleOp back(ir::Op::kSoftmaxCrossEntropyBackward, {f32({1, 3}), i32({1}), kScalar},
                lossAttrs("sum", 1));
  std::copy(row, row + 3, back.in(0).f32());
  back.in(1).i32()[0] = 1;
  back.in(2).f32()[0] = 1;
  back.run();
  for (int j = 0; j < 3; ++j) EXPECT_TRUE(std::isfinite(back.out().f32()[j]));
  EXPECT_NEAR(back.out().f32()[2], 0.0f, 1e-30);
}

// The backward op is the gradient of the loss times dloss: central differences of the
// naive loss with respect to every logit.
TEST(SoftmaxCrossEntropyBackward, MatchesFiniteDifferences) {
  for (const char* reduction : {"mean", "sum"}) {
    const int64_t rows = 5, classes = 4, divisor = std::string(reduction) == "mean" ? 10 : 1;
    std::mt19937 rng(24);
    SingleOp op(ir::Op::kSoftmaxCrossEntropyBackward, {f32({rows, classes}), i32({rows}), kScalar},
                lossAttrs(reduction, divisor));
    op.in(0).fillUniform(rng, -2, 2);
    const int32_t labels[] = {3, 0, -1, 2, 1};
    std::copy(labels, labels + rows, op.in(1).i32());
    const double dloss = 1.5;
    op.in(2).f32()[0] = static_cast<float>(dloss);
    op.run();

    std::vector<double> x = toDouble(op.in(0)), want(x.size());
    constexpr double h = 1e-6;
    for (size_t k = 0; k < x.size(); ++k) {
      double keep = x[k];
      x[k] = keep + h;
      double up = lossRef(x, labels, rows, classes, static_cast<double>(divisor));
      x[k] = keep - h;
      double down = lossRef(x, labels, rows, classes, static_cast<double>(divisor));
      x[k] = keep;
      want[k] = dloss * (up - down) / (2 * h);
    }
    EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), kTolerance)
        << reduction;
  }
}

TEST(Accuracy, CountsArgMaxMatches) {
  std::mt19937 rng(25);
  const int64_t rows = 50, classes = 10;
  SingleOp op(ir::Op::kAccuracy, {f32({rows, classes}), i32({rows})});
  op.in(0).fillUniform(rng);
  op.in(1).fillInts(rng, -1, classes - 1);
  // Make some rows right on purpose so the count is not ~0.
  for (int64_t r = 0; r < rows; r += 3)
    if (op.in(1).i32()[r] >= 0) op.in(0).f32()[r * classes + op.in(1).i32()[r]] = 5;
  op.run();
  int32_t want = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = op.in(0).f32() + r * classes;
    int64_t best = std::max_element(row, row + classes) - row;  // first max
    want += op.in(1).i32()[r] >= 0 && best == op.in(1).i32()[r];
  }
  EXPECT_GT(want, 0);
  EXPECT_EQ(op.out().i32()[0], want);
}

// Ties go to the first maximum; a negative label never counts, even when every logit ties.
TEST(Accuracy, TiesAndPadding) {
  SingleOp op(ir::Op::kAccuracy, {f32({4, 3}), i32({4})});
  const float logits[] = {1, 3, 3,  //
                          1, 3, 3,  //
                          0, 0, 0,  //
                          0, 0, 0};
  const int32_t labels[] = {1, 2, 0, -1};
  std::copy(logits, logits + 12, op.in(0).f32());
  std::copy(labels, labels + 4, op.in(1).i32());
  op.run();
  EXPECT_EQ(op.out().i32()[0], 2);  // rows 0 and 2
}

TEST(Accuracy, SingleRow) {
  SingleOp op(ir::Op::kAccuracy, {f32({1, 2}), i32({1})});
  op.in(0).f32()[0] = -1;
  op.in(0).f32()[1] = -0.5;
  op.in(1).i32()[0] = 1;
  op.run();
  EXPECT_EQ(op.out().i32()[0], 1);
}

}  // namespace
}  // namespace tandem::testing
