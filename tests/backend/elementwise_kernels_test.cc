// relu, relu_backward, add, flatten and flatten_backward against naive loops; relu's
// backward op also against central finite differences of the naive relu.

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

// Types, not shapes: f32(shape) on a loop's shape trips GCC 12's maybe-uninitialized
// false positive in absl::InlinedVector's move.
const ir::TensorType kTypes[] = {f32({1}), f32({7}), f32({1, 5}), f32({3, 4, 5, 6}),
                                 f32({2, 64, 9, 9})};

TEST(Relu, MatchesReference) {
  std::mt19937 rng(31);
  for (const ir::TensorType& t : kTypes) {
    SingleOp op(ir::Op::kRelu, {t});
    op.in(0).fillUniform(rng);
    op.run();
    std::vector<double> want(static_cast<size_t>(op.in(0).size()));
    for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, double(op.in(0).f32()[i]));
    EXPECT_EQ(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 0.0);
  }
}

TEST(ReluBackward, MatchesReference) {
  std::mt19937 rng(32);
  for (const ir::TensorType& t : kTypes) {
    SingleOp op(ir::Op::kReluBackward, {t, t});
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng, -1, 1);
    for (int64_t i = 0; i < op.in(1).size(); ++i)  // y is a relu output
      op.in(1).f32()[i] = std::max(0.0f, op.in(1).f32()[i]);
    op.run();
    std::vector<double> want(static_cast<size_t>(op.in(0).size()));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = op.in(1).f32()[i] > 0 ? double(op.in(0).f32()[i]) : 0.0;
    EXPECT_EQ(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 0.0);
  }
}

// relu_backward(dy, relu(x)) is the gradient of <dy, relu(x)> with respect to x (away from
// the kink at 0, where the test keeps every x).
TEST(ReluBackward, MatchesFiniteDifferences) {
  std::mt19937 rng(33);
  const int64_t n = 40;
  Buffer x(f32({n}));
  x.fillUniform(rng);
  for (int64_t i = 0; i < n; ++i)
    if (std::abs(x.f32()[i]) < 0.01f) x.f32()[i] = 0.5f;
  SingleOp op(ir::Op::kReluBackward, {f32({n}), f32({n})});
  op.in(0).fillUniform(rng);
  for (int64_t i = 0; i < n; ++i) op.in(1).f32()[i] = std::max(0.0f, x.f32()[i]);
  op.run();
  std::vector<double> want(n);
  constexpr double h = 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    double xi = x.f32()[i], dy = op.in(0).f32()[i];
    want[static_cast<size_t>(i)] = dy * (std::max(0.0, xi + h) - std::max(0.0, xi - h)) / (2 * h);
  }
  EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), n), 1e-5);
}

TEST(Add, MatchesReference) {
  std::mt19937 rng(34);
  for (const ir::TensorType& t : kTypes) {
    SingleOp op(ir::Op::kAdd, {t, t});
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng);
    op.run();
    std::vector<double> want(static_cast<size_t>(op.in(0).size()));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = double(op.in(0).f32()[i]) + op.in(1).f32()[i];
    EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 1e-7);
  }
}

TEST(Add, Int32) {
  SingleOp op(ir::Op::kAdd, {i32({3}), i32({3})});
  const int32_t a[] = {1, -2, 300}, b[] = {4, 2, -1000};
  std::copy(a, a + 3, op.in(0).i32());
  std::copy(b, b + 3, op.in(1).i32());
  op.run();
  EXPECT_EQ(op.out().i32()[0], 5);
  EXPECT_EQ(op.out().i32()[1], 0);
  EXPECT_EQ(op.out().i32()[2], -700);
}

// flatten and its backward op keep the row-major bytes: the result is a copy.
TEST(Flatten, CopiesBytes) {
  std::mt19937 rng(35);
  SingleOp op(ir::Op::kFlatten, {f32({3, 4, 5, 5})});
  op.in(0).fillUniform(rng);
  op.run();
  EXPECT_EQ(op.out().type(), f32({3, 100}));
  EXPECT_EQ(std::memcmp(op.out().f32(), op.in(0).f32(), 300 * sizeof(float)), 0);

  SingleOp back(ir::Op::kFlattenBackward, {f32({3, 100}), f32({3, 4, 5, 5})});
  back.in(0).fillUniform(rng);
  back.run();
  EXPECT_EQ(back.out().type(), f32({3, 4, 5, 5}));
  EXPECT_EQ(std::memcmp(back.out().f32(), back.in(0).f32(), 300 * sizeof(float)), 0);
}

}  // namespace
}  // namespace tandem::testing
