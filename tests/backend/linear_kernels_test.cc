// linear and its backward ops against naive double-precision loops, and the backward ops
// against central finite differences of the naive forward.

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

constexpr double kTolerance = 1e-5;

/// Weights at their initialization scale, uniform in +-1/sqrt(fan_in), so that outputs are
/// O(1) as in a network. (With +-1 weights an 800-term f32 sum is O(10) and carries ~1e-5
/// of rounding, which says nothing about the kernel.)
void fillWeights(Buffer& w, std::mt19937& rng, int64_t fan_in) {
  float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  w.fillUniform(rng, -bound, bound);
}

std::vector<double> toDouble(Buffer& b) { return std::vector<double>(b.f32(), b.f32() + b.size()); }

/// y[N,O] = x[N,I] w[O,I]^T (+ b[O]).
std::vector<double> linearRef(const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>* b, int64_t n, int64_t in, int64_t out) {
  std::vector<double> y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[static_cast<size_t>(o)] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        s += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(o * in + i)];
      y[static_cast<size_t>(r * out + o)] = s;
    }
  return y;
}

/// <dy, linear(x, w, b)>: the scalar whose gradients the backward ops compute.
double probe(const std::vector<double>& dy, const std::vector<double>& x,
             const std::vector<double>& w, const std::vector<double>* b, int64_t n, int64_t in,
             int64_t out) {
  std::vector<double> y = linearRef(x, w, b, n, in, out);
  double s = 0;
  for (size_t k = 0; k < y.size(); ++k) s += dy[k] * y[k];
  return s;
}

/// Central differences of f with respect to every element of v (h = 1e-6, in double).
template <typename F>
std::vector<double> finiteDifferences(std::vector<double>& v, F f) {
  constexpr double h = 1e-6;
  std::vector<double> g(v.size());
  for (size_t k = 0; k < v.size(); ++k) {
    double keep = v[k];
    v[k] = keep + h;
    double up = f();
    v[k] = keep - h;
    double down = f();
    v[k] = keep;
    g[k] = (up - down) / (2 * h);
  }
  return g;
}

struct Shape {
  int64_t n, in, out;
};

class LinearTest : public ::testing::TestWithParam<Shape> {};

TEST_P(LinearTest, ForwardMatchesReference) {
  auto [n, in, out] = GetParam();
  std::mt19937 rng(7);
  for (bool bias : {false, true}) {
    std::vector<ir::TensorType> types{f32({n, in}), f32({out, in})};
    if (bias) types.push_back(f32({out}));
    SingleOp op(ir::Op::kLinear, types);
    op.in(0).fillUniform(rng);
    fillWeights(op.in(1), rng, in);
    if (bias) op.in(2).fillUniform(rng);
    op.run();
    std::vector<double> b = bias ? toDouble(op.in(2)) : std::vector<double>{};
    std::vector<double> want =
        linearRef(toDouble(op.in(0)), toDouble(op.in(1)), bias ? &b : nullptr, n, in, out);
    EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), kTolerance)
        << "bias=" << bias;
  }
}

TEST_P(LinearTest, BackwardDataMatchesReference) {
  auto [n, in, out] = GetParam();
  std::mt19937 rng(8);
  SingleOp op(ir::Op::kLinearBackwardData, {f32({n, out}), f32({out, in})});
  op.in(0).fillUniform(rng);
  fillWeights(op.in(1), rng, out);  // dx sums over the O outputs
  op.run();
  std::vector<double> want(static_cast<size_t>(n * in), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o)
        want[static_cast<size_t>(r * in + i)] +=
            double(op.in(0).f32()[r * out + o]) * op.in(1).f32()[o * in + i];
  EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), kTolerance);
}

TEST_P(LinearTest, BackwardWeightMatchesReference) {
  auto [n, in, out] = GetParam();
  std::mt19937 rng(9);
  for (bool bias : {false, true}) {
    SingleOp op(ir::Op::kLinearBackwardWeight, {f32({n, out}), f32({n, in})}, {{"bias", bias}});
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng);
    op.run();
    std::vector<double> dw(static_cast<size_t>(out * in), 0.0), db(static_cast<size_t>(out), 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double dy = op.in(0).f32()[r * out + o];
        db[static_cast<size_t>(o)] += dy;
        for (int64_t i = 0; i < in; ++i)
          dw[static_cast<size_t>(o * in + i)] += dy * op.in(1).f32()[r * in + i];
      }
    EXPECT_LE(maxRelativeError(op.out(0).f32(), dw.data(), op.out(0).size()), kTolerance)
        << "bias=" << bias;
    if (bias) {
      EXPECT_LE(maxRelativeError(op.out(1).f32(), db.data(), op.out(1).size()), kTolerance);
    }
  }
}

// N=1, a single output, LeNet's layers and the ResNet head.
INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(Shape{1, 7, 3}, Shape{5, 7, 3}, Shape{3, 4, 1},
                                           Shape{128, 800, 128}, Shape{128, 128, 10},
                                           Shape{64, 512, 10}));

// Both backward ops are the gradients of <dy, linear(x, w, b)>: compare them with central
// differences of the naive forward.
TEST(LinearBackward, MatchesFiniteDifferences) {
  const int64_t n = 4, in = 6, out = 3;
  std::mt19937 rng(10);
  Buffer xb(f32({n, in})), wb(f32({out, in})), bb(f32({out})), dyb(f32({n, out}));
  for (Buffer* b : {&xb, &wb, &bb, &dyb}) b->fillUniform(rng);
  std::vector<double> x = toDouble(xb), w = toDouble(wb), b = toDouble(bb), dy = toDouble(dyb);
  auto f = [&] { return probe(dy, x, w, &b, n, in, out); };
  std::vector<double> want_dx = finiteDifferences(x, f), want_dw = finiteDifferences(w, f),
                      want_db = finiteDifferences(b, f);

  SingleOp data(ir::Op::kLinearBackwardData, {f32({n, out}), f32({out, in})});
  std::copy(dyb.f32(), dyb.f32() + dyb.size(), data.in(0).f32());
  std::copy(wb.f32(), wb.f32() + wb.size(), data.in(1).f32());
  data.run();
  EXPECT_LE(maxRelativeError(data.out().f32(), want_dx.data(), n * in), kTolerance);

  SingleOp weight(ir::Op::kLinearBackwardWeight, {f32({n, out}), f32({n, in})}, {{"bias", true}});
  std::copy(dyb.f32(), dyb.f32() + dyb.size(), weight.in(0).f32());
  std::copy(xb.f32(), xb.f32() + xb.size(), weight.in(1).f32());
  weight.run();
  EXPECT_LE(maxRelativeError(weight.out(0).f32(), want_dw.data(), out * in), kTolerance);
  EXPECT_LE(maxRelativeError(weight.out(1).f32(), want_db.data(), out), kTolerance);
}

// The primitive is created once; later runs see new data through the same kernel.
TEST(Linear, RerunsWithNewData) {
  std::mt19937 rng(11);
  SingleOp op(ir::Op::kLinear, {f32({2, 3}), f32({4, 3}), f32({4})});
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
    op.run();
    std::vector<double> b = toDouble(op.in(2));
    std::vector<double> want = linearRef(toDouble(op.in(0)), toDouble(op.in(1)), &b, 2, 3, 4);
    EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), 8), kTolerance) << "round " << round;
  }
}

}  // namespace
}  // namespace tandem::testing
