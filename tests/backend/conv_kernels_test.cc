// conv2d, conv2d_backward_data and conv2d_backward_filter against naive loops in double
// precision, and the naive backward loops against central finite differences of the
// naive forward. Every shape runs with both strategies (plain tensors, blocked layouts
// with reorders) and with the kernel table's own choice.

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/kernels.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

using backend::cpu::ConvStrategy;
using backend::cpu::KernelInit;
using backend::cpu::KernelOr;

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad;
  bool bias;

  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
  ir::Shape x() const { return {n, c, h, w}; }
  ir::Shape wt() const { return {o, c, k, k}; }
  ir::Shape y() const { return {n, o, oh(), ow()}; }
  std::string name() const {
    return absl::StrCat("n", n, "c", c, "h", h, "w", w, "o", o, "k", k, "s", stride, "p", pad,
                        bias ? "b" : "");
  }
};

std::vector<double> toDouble(const float* p, int64_t n) { return std::vector<double>(p, p + n); }

/// Calls f(n, o, i, j, c, r, s, x_index, w_index, y_index) for every tap that reads a
/// real (not padding) input element: the one loop nest all references share.
template <typename F>
void forEachTap(const ConvCase& cc, F f) {
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t o = 0; o < cc.o; ++o)
      for (int64_t i = 0; i < cc.oh(); ++i)
        for (int64_t j = 0; j < cc.ow(); ++j)
          for (int64_t c = 0; c < cc.c; ++c)
            for (int64_t r = 0; r < cc.k; ++r)
              for (int64_t s = 0; s < cc.k; ++s) {
                int64_t hi = i * cc.stride - cc.pad + r, wi = j * cc.stride - cc.pad + s;
                if (hi < 0 || hi >= cc.h || wi < 0 || wi >= cc.w) continue;
                f(((n * cc.c + c) * cc.h + hi) * cc.w + wi, ((o * cc.c + c) * cc.k + r) * cc.k + s,
                  ((n * cc.o + o) * cc.oh() + i) * cc.ow() + j);
              }
}

int64_t count(const ir::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<double> convRef(const ConvCase& cc, const std::vector<double>& x,
                            const std::vector<double>& w, const std::vector<double>* b) {
  std::vector<double> y(count(cc.y()), 0.0);
  forEachTap(cc, [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * w[wi]; });
  if (b != nullptr)
    for (size_t i = 0; i < y.size(); ++i) y[i] += (*b)[(i / (cc.oh() * cc.ow())) % cc.o];
  return y;
}

std::vector<double> convBackwardDataRef(const ConvCase& cc, const std::vector<double>& dy,
                                        const std::vector<double>& w) {
  std::vector<double> dx(count(cc.x()), 0.0);
  forEachTap(cc, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy[yi] * w[wi]; });
  return dx;
}

std::vector<double> convBackwardFilterRef(const ConvCase& cc, const std::vector<double>& dy,
                                          const std::vector<double>& x) {
  std::vector<double> dw(count(cc.wt()), 0.0);
  forEachTap(cc, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += dy[yi] * x[xi]; });
  return dw;
}

std::vector<double> convBackwardBiasRef(const ConvCase& cc, const std::vector<double>& dy) {
  std::vector<double> db(cc.o, 0.0);
  for (size_t i = 0; i < dy.size(); ++i) db[(i / (cc.oh() * cc.ow())) % cc.o] += dy[i];
  return db;
}

/// d/dv of sum(dy * conv(x, w, b)) by central differences, one element of v at a time;
/// v is x, w or b for `which` = 0, 1, 2.
std::vector<double> finiteDifference(const ConvCase& cc, const std::vector<double>& dy,
                                     std::vector<double> x, std::vector<double> w,
                                     std::vector<double> b, int which) {
  std::vector<double>* v = which == 0 ? &x : which == 1 ? &w : &b;
  auto loss = [&] {
    std::vector<double> y = convRef(cc, x, w, &b);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
    return l;
  };
  const double h = 1e-3;  // the loss is linear in each variable: only rounding remains
  std::vector<double> g(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    double keep = (*v)[i];
    (*v)[i] = keep + h;
    double up = loss();
    (*v)[i] = keep - h;
    double down = loss();
    (*v)[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double maxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  return worst;
}

using Factory = KernelOr (*)(const KernelInit&, ConvStrategy);

/// Builds the kernel with `strategy` (kAuto goes through the kernel table) and runs it over
/// the op's buffers; results are first filled with garbage so that a kernel which does
/// not write every element fails.
void runWith(SingleOp& op, Factory factory, ConvStrategy strategy, std::mt19937& rng) {
  KernelOr k = strategy == ConvStrategy::kAuto
                   ? backend::cpu::makeKernel(op.node(), op.ctx())
                   : factory(KernelInit{op.node(), op.ctx()}, strategy);
  ASSERT_TRUE(k.ok()) << k.status();
  std::vector<backend::TensorView> in, out;
  for (size_t i = 0; i < op.node().numOperands(); ++i) in.push_back(op.in(i).view());
  for (size_t i = 0; i < op.node().numResults(); ++i) {
    op.out(i).fillUniform(rng, 1e6, 2e6);
    out.push_back(op.out(i).view());
  }
  ASSERT_TRUE((*k)->runHere(in, out).ok());
}

/// Filters at the scale training uses (variance 1 / fan-in), so that outputs stay near
/// unit size: the relative bound then measures the kernels and not float accumulation
/// over a thousand large terms.
void fillFilter(Buffer& w, const ConvCase& cc, std::mt19937& rng) {
  float bound = static_cast<float>(std::sqrt(3.0 / double(cc.c * cc.k * cc.k)));
  w.fillUniform(rng, -bound, bound);
}

const std::vector<ConvCase> kCases = {
    {2, 3, 7, 7, 4, 3, 1, 1, true},     {2, 3, 8, 8, 5, 3, 2, 1, false},
    {1, 4, 9, 9, 6, 5, 2, 2, true},     {3, 2, 6, 9, 3, 3, 1, 0, true},
    {2, 5, 11, 11, 7, 3, 3, 2, false},  {1, 1, 28, 28, 20, 3, 1, 0, true},
    {2, 20, 13, 13, 50, 5, 1, 0, true}, {2, 16, 8, 8, 32, 3, 2, 1, false},
    {2, 64, 7, 7, 64, 3, 1, 1, false},  {2, 8, 8, 8, 16, 1, 2, 0, false},
    {1, 3, 5, 5, 2, 1, 1, 0, true},     {2, 24, 10, 10, 40, 3, 1, 1, true},
    {1, 2, 4, 4, 3, 1, 1, 1, true},     {2, 12, 9, 9, 30, 5, 1, 2, false},
};

class ConvKernelTest : public ::testing::TestWithParam<ConvStrategy> {};

TEST_P(ConvKernelTest, ForwardMatchesReference) {
  std::mt19937 rng(1);
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name());
    std::vector<ir::TensorType> types{f32(cc.x()), f32(cc.wt())};
    if (cc.bias) types.push_back(f32({cc.o}));
    SingleOp op(ir::Op::kConv2d, types, {{"stride", cc.stride}, {"pad", cc.pad}});
    for (size_t i = 0; i < types.size(); ++i) op.in(i).fillUniform(rng);
    fillFilter(op.in(1), cc, rng);
    runWith(op, backend::cpu::makeConv2dKernelWithStrategy, GetParam(), rng);
    std::vector<double> b = cc.bias ? toDouble(op.in(2).f32(), cc.o) : std::vector<double>();
    std::vector<double> ref = convRef(cc, toDouble(op.in(0).f32(), op.in(0).size()),
                                      toDouble(op.in(1).f32(), op.in(1).size()),
                                      cc.bias ? &b : nullptr);
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(ref.size()));
    EXPECT_LE(maxRelativeError(op.out(0).f32(), ref.data(), op.out(0).size()), 1e-5);
  }
}

TEST_P(ConvKernelTest, BackwardDataMatchesReference) {
  std::mt19937 rng(2);
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name());
    SingleOp op(ir::Op::kConv2dBackwardData, {f32(cc.y()), f32(cc.wt()), f32(cc.x())},
                {{"stride", cc.stride}, {"pad", cc.pad}});
    for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
    fillFilter(op.in(1), cc, rng);
    runWith(op, backend::cpu::makeConv2dBackwardDataKernelWithStrategy, GetParam(), rng);
    std::vector<double> ref = convBackwardDataRef(cc, toDouble(op.in(0).f32(), op.in(0).size()),
                                                  toDouble(op.in(1).f32(), op.in(1).size()));
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(ref.size()));
    EXPECT_LE(maxRelativeError(op.out(0).f32(), ref.data(), op.out(0).size()), 1e-5);
  }
}

TEST_P(ConvKernelTest, BackwardFilterMatchesReference) {
  std::mt19937 rng(3);
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name());
    SingleOp op(ir::Op::kConv2dBackwardFilter, {f32(cc.y()), f32(cc.x()), f32(cc.wt())},
                {{"stride", cc.stride}, {"pad", cc.pad}, {"bias", cc.bias}});
    for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
    runWith(op, backend::cpu::makeConv2dBackwardFilterKernelWithStrategy, GetParam(), rng);
    std::vector<double> dy = toDouble(op.in(0).f32(), op.in(0).size());
    std::vector<double> dw = convBackwardFilterRef(cc, dy, toDouble(op.in(1).f32(), op.in(1).size()));
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(dw.size()));
    EXPECT_LE(maxRelativeError(op.out(0).f32(), dw.data(), op.out(0).size()), 1e-5);
    if (cc.bias) {
      std::vector<double> db = convBackwardBiasRef(cc, dy);
      EXPECT_LE(maxRelativeError(op.out(1).f32(), db.data(), cc.o), 1e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, ConvKernelTest,
                         ::testing::Values(ConvStrategy::kAuto, ConvStrategy::kPlain,
                                           ConvStrategy::kBlocked),
                         [](const auto& info) {
                           switch (info.param) {
                             case ConvStrategy::kAuto: return std::string("Auto");
                             case ConvStrategy::kPlain: return std::string("Plain");
                             case ConvStrategy::kBlocked: return std::string("Blocked");
                           }
                           return std::string();
                         });

// The backward references are the gradients of the forward reference.
TEST(ConvReference, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> d(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<double> v(n);
    for (double& e : v) e = d(rng);
    return v;
  };
  for (const ConvCase& cc : {ConvCase{2, 2, 5, 6, 3, 3, 2, 1, true},
                             ConvCase{1, 3, 6, 6, 2, 3, 1, 2, true}}) {
    SCOPED_TRACE(cc.name());
    std::vector<double> x = random(count(cc.x())), w = random(count(cc.wt())),
                        b = random(cc.o), dy = random(count(cc.y()));
    EXPECT_LE(maxDiff(convBackwardDataRef(cc, dy, w), finiteDifference(cc, dy, x, w, b, 0)), 1e-8);
    EXPECT_LE(maxDiff(convBackwardFilterRef(cc, dy, x), finiteDifference(cc, dy, x, w, b, 1)),
              1e-8);
    EXPECT_LE(maxDiff(convBackwardBiasRef(cc, dy), finiteDifference(cc, dy, x, w, b, 2)), 1e-8);
  }
}

// Primitives are made once and reused: a second run over the same inputs gives the same
// bits (and a run over new inputs does not see the old ones).
TEST(ConvKernel, RunsTwiceIdentically) {
  std::mt19937 rng(5);
  for (ConvStrategy strategy : {ConvStrategy::kPlain, ConvStrategy::kBlocked}) {
    ConvCase cc{2, 16, 9, 9, 24, 3, 1, 1, true};
    SingleOp op(ir::Op::kConv2dBackwardFilter, {f32(cc.y()), f32(cc.x()), f32(cc.wt())},
                {{"stride", cc.stride}, {"pad", cc.pad}, {"bias", true}});
    for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
    auto k = backend::cpu::makeConv2dBackwardFilterKernelWithStrategy(
        KernelInit{op.node(), op.ctx()}, strategy);
    ASSERT_TRUE(k.ok()) << k.status();
    std::vector<backend::TensorView> in{op.in(0).view(), op.in(1).view(), op.in(2).view()};
    std::vector<backend::TensorView> out{op.out(0).view(), op.out(1).view()};
    ASSERT_TRUE((*k)->runHere(in, out).ok());
    std::vector<float> first(op.out(0).f32(), op.out(0).f32() + op.out(0).size());
    op.out(0).fillUniform(rng);
    ASSERT_TRUE((*k)->runHere(in, out).ok());
    EXPECT_EQ(first, std::vector<float>(op.out(0).f32(), op.out(0).f32() + op.out(0).size()));
  }
  // Through the table, forward: same inputs, same outputs.
  ConvCase cc{2, 3, 7, 7, 4, 3, 1, 1, true};
  SingleOp op(ir::Op::kConv2d, {f32(cc.x()), f32(cc.wt()), f32({cc.o})},
              {{"stride", cc.stride}, {"pad", cc.pad}});
  for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
  op.run();
  std::vector<float> first(op.out(0).f32(), op.out(0).f32() + op.out(0).size());
  op.run();
  EXPECT_EQ(first, std::vector<float>(op.out(0).f32(), op.out(0).f32() + op.out(0).size()));
}

// The kernels compute in f32; another dtype is an error naming the node, not a crash.
TEST(ConvKernel, OtherDtypesAreAnErrorNamingTheNode) {
  ir::TensorType x{ir::DType::kBF16, {1, 2, 5, 5}}, w{ir::DType::kBF16, {3, 2, 3, 3}};
  SingleOp op(ir::Op::kConv2d, {x, w}, {{"stride", int64_t{1}}, {"pad", int64_t{0}}});
  auto k = backend::cpu::makeKernel(op.node(), op.ctx());
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find(op.node().describe()), absl::string_view::npos)
      << k.status();
  EXPECT_NE(k.status().message().find("f32"), absl::string_view::npos) << k.status();
}

}  // namespace
}  // namespace tandem::testing
