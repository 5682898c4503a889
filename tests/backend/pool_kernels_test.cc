// Max, average and global average pooling and their backward ops against naive loops in
// double precision, and the naive backward loops against central finite differences of
// the naive forward. Inputs are random floats, so max-pool windows have no ties.

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cpu/avg_pool_rows.h"
#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/kernels.h"
#include "backend/unary_math.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

struct PoolCase {
  int64_t n, c, h, w;
  ir::Hw k, stride, pad;  // per axis: one int, or {h, w}

  int64_t oh() const { return (h + 2 * pad.h - k.h) / stride.h + 1; }
  int64_t ow() const { return (w + 2 * pad.w - k.w) / stride.w + 1; }
  ir::Shape x() const { return {n, c, h, w}; }
  ir::Shape y() const { return {n, c, oh(), ow()}; }
  int64_t xSize() const { return n * c * h * w; }
  int64_t ySize() const { return n * c * oh() * ow(); }
  std::string name() const {
    return absl::StrCat("n", n, "c", c, "h", h, "w", w, "k", ir::toString(k.toAttr()), "s",
                        ir::toString(stride.toAttr()), "p", ir::toString(pad.toAttr()));
  }
  SingleOp::Attrs attrs() const {
    return {{"kernel", k.toAttr()}, {"stride", stride.toAttr()}, {"pad", pad.toAttr()}};
  }
};

enum class Kind { kMax, kAvg };

/// For each output element, the input indices of its window that are not padding.
std::vector<std::vector<int64_t>> windows(const PoolCase& pc) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t nc = 0; nc < pc.n * pc.c; ++nc)
    for (int64_t i = 0; i < pc.oh(); ++i)
      for (int64_t j = 0; j < pc.ow(); ++j) {
        std::vector<int64_t>& win = out.emplace_back();
        for (int64_t r = 0; r < pc.k.h; ++r)
          for (int64_t s = 0; s < pc.k.w; ++s) {
            int64_t hi = i * pc.stride.h - pc.pad.h + r, wi = j * pc.stride.w - pc.pad.w + s;
            if (hi >= 0 && hi < pc.h && wi >= 0 && wi < pc.w) win.push_back((nc * pc.h + hi) * pc.w + wi);
          }
      }
  return out;
}

/// Max over the real elements (padding never wins); average over kh*kw (padding counts
/// as zeros).
std::vector<double> poolRef(Kind kind, const PoolCase& pc, const std::vector<double>& x) {
  std::vector<double> y;
  for (const auto& win : windows(pc)) {
    double v = kind == Kind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i : win) v = kind == Kind::kMax ? std::max(v, x[i]) : v + x[i];
    y.push_back(kind == Kind::kMax ? v : v / double(pc.k.h * pc.k.w));
  }
  return y;
}

std::vector<double> poolBackwardRef(Kind kind, const PoolCase& pc, const std::vector<double>& dy,
                                    const std::vector<double>& x) {
  std::vector<double> dx(x.size(), 0.0);
  auto wins = windows(pc);
  for (size_t o = 0; o < wins.size(); ++o) {
    if (kind == Kind::kAvg) {
      for (int64_t i : wins[o]) dx[i] += dy[o] / double(pc.k.h * pc.k.w);
      continue;
    }
    int64_t best = wins[o][0];
    for (int64_t i : wins[o])
      if (x[i] > x[best]) best = i;
    dx[best] += dy[o];
  }
  return dx;
}

/// d/dx of sum(dy * f(x)) by central differences.
template <typename F>
std::vector<double> finiteDifference(F f, const std::vector<double>& dy, std::vector<double> x,
                                     double h) {
  auto loss = [&] {
    std::vector<double> y = f(x);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
    return l;
  };
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + h;
    double up = loss();
    x[i] = keep - h;
    double down = loss();
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

std::vector<double> toDouble(Buffer& b) { return std::vector<double>(b.f32(), b.f32() + b.size()); }

double maxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  return worst;
}

const std::vector<PoolCase> kCases = {
    {2, 3, 8, 8, 2, 2, 0},
    {2, 3, 7, 7, 3, 2, 1},
    {1, 4, 6, 6, 3, 1, 1},
    {2, 2, 5, 5, 2, 2, 1},
    {1, 3, 10, 10, 3, 3, 0},
    {2, 5, 9, 9, 2, 2, 0},
    {2, 3, 9, 7, 4, 2, 2},
    {3, 20, 26, 26, 2, 2, 0},
    // 2x2 rows past one vector pair (avg_pool_rows.h: 32 columns a step), even and odd.
    {1, 3, 6, 70, 2, 2, 0},
    {2, 2, 7, 33, 2, 2, 0},
    {2, 16, 11, 11, 3, 2, 1},
    // Height and width apart: kernel, stride and padding each per axis.
    {2, 3, 9, 7, {3, 2}, {2, 1}, {1, 0}},
    {1, 4, 8, 9, {1, 3}, {1, 2}, {0, 1}},
    {2, 2, 6, 5, {2, 1}, {2, 1}, 0},
};

void fillGarbage(SingleOp& op, std::mt19937& rng) { op.out(0).fillUniform(rng, 1e6, 2e6); }

class PoolKernelTest : public ::testing::TestWithParam<Kind> {
 protected:
  ir::Op forwardOp() const { return GetParam() == Kind::kMax ? ir::Op::kMaxPool2d : ir::Op::kAvgPool2d; }
  ir::Op backwardOp() const {
    return GetParam() == Kind::kMax ? ir::Op::kMaxPool2dBackward : ir::Op::kAvgPool2dBackward;
  }
};

TEST_P(PoolKernelTest, ForwardMatchesReference) {
  std::mt19937 rng(11);
  for (const PoolCase& pc : kCases) {
    SCOPED_TRACE(pc.name());
    SingleOp op(forwardOp(), {f32(pc.x())}, pc.attrs());
    op.in(0).fillUniform(rng);
    fillGarbage(op, rng);
    op.run();
    std::vector<double> ref = poolRef(GetParam(), pc, toDouble(op.in(0)));
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(ref.size()));
    EXPECT_LE(maxRelativeError(op.out(0).f32(), ref.data(), op.out(0).size()), 1e-5);
  }
}

TEST_P(PoolKernelTest, BackwardMatchesReference) {
  std::mt19937 rng(12);
  for (const PoolCase& pc : kCases) {
    SCOPED_TRACE(pc.name());
    SingleOp op(backwardOp(), {f32(pc.y()), f32(pc.x())}, pc.attrs());
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng);
    fillGarbage(op, rng);
    op.run();
    std::vector<double> ref = poolBackwardRef(GetParam(), pc, toDouble(op.in(0)), toDouble(op.in(1)));
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(ref.size()));
    EXPECT_LE(maxRelativeError(op.out(0).f32(), ref.data(), op.out(0).size()), 1e-5);
  }
}

TEST_P(PoolKernelTest, ReferenceBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> d(-1, 1);
  for (const PoolCase& pc : {PoolCase{2, 2, 7, 7, 3, 2, 1}, PoolCase{1, 2, 6, 5, 2, 2, 1}}) {
    SCOPED_TRACE(pc.name());
    std::vector<double> x(pc.xSize()), dy(pc.ySize());
    for (double& v : x) v = d(rng);
    for (double& v : dy) v = d(rng);
    auto f = [&](const std::vector<double>& in) { return poolRef(GetParam(), pc, in); };
    // Max pooling is linear around a point without ties: a small step stays on its piece.
    EXPECT_LE(maxDiff(poolBackwardRef(GetParam(), pc, dy, x), finiteDifference(f, dy, x, 1e-6)),
              1e-7);
  }
}

TEST_P(PoolKernelTest, RunsTwiceIdentically) {
  std::mt19937 rng(14);
  PoolCase pc{2, 8, 9, 9, 3, 2, 1};
  SingleOp op(backwardOp(), {f32(pc.y()), f32(pc.x())}, pc.attrs());
  op.in(0).fillUniform(rng);
  op.in(1).fillUniform(rng);
  op.run();
  std::vector<float> first(op.out(0).f32(), op.out(0).f32() + op.out(0).size());
  fillGarbage(op, rng);
  op.run();
  EXPECT_EQ(first, std::vector<float>(op.out(0).f32(), op.out(0).f32() + op.out(0).size()));
}

INSTANTIATE_TEST_SUITE_P(Kinds, PoolKernelTest, ::testing::Values(Kind::kMax, Kind::kAvg),
                         [](const auto& info) {
                           return std::string(info.param == Kind::kMax ? "Max" : "Avg");
                         });

/// Bytes of a buffer's f32 elements, for comparing bit for bit.
std::vector<uint32_t> bits(Buffer& b) {
  std::vector<uint32_t> out(static_cast<size_t>(b.size()));
  std::memcpy(out.data(), b.f32(), out.size() * sizeof(float));
  return out;
}

// avg_pool2d{relu} (fuse-relu-pool) against relu then avg_pool2d, and its backward against
// avg_pool2d_backward then relu_backward, as the unfused step runs them: the same bits,
// with inputs that hold zeros, negative zeros, NaN and infinities, in the 2x2 loop and the
// general one.
TEST(AvgPoolKernel, ReluFusedEqualsReluThenPoolBitForBit) {
  std::mt19937 rng(21);
  for (const PoolCase& pc : kCases) {
    SCOPED_TRACE(pc.name());
    SingleOp::Attrs fused_attrs = pc.attrs();
    fused_attrs.emplace_back("relu", true);
    SingleOp relu(ir::Op::kRelu, {f32(pc.x())});
    relu.in(0).fillUniform(rng, -1, 1);
    float* x = relu.in(0).f32();
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[pc.xSize() / 3] = std::numeric_limits<float>::quiet_NaN();
    x[pc.xSize() / 2] = -std::numeric_limits<float>::infinity();
    x[pc.xSize() - 1] = std::numeric_limits<float>::infinity();
    relu.run();
    SingleOp pool(ir::Op::kAvgPool2d, {f32(pc.x())}, pc.attrs());
    SingleOp fused(ir::Op::kAvgPool2d, {f32(pc.x())}, fused_attrs);
    std::memcpy(pool.in(0).f32(), relu.out(0).f32(), sizeof(float) * pc.xSize());
    std::memcpy(fused.in(0).f32(), x, sizeof(float) * pc.xSize());
    fillGarbage(pool, rng);
    fillGarbage(fused, rng);
    pool.run();
    fused.run();
    EXPECT_EQ(bits(fused.out(0)), bits(pool.out(0)));

    // Backward: dy, then relu_backward(avg_pool2d_backward(dy, r), r) against the fused
    // avg_pool2d_backward{relu}(dy, x).
    SingleOp pool_bwd(ir::Op::kAvgPool2dBackward, {f32(pc.y()), f32(pc.x())}, pc.attrs());
    SingleOp fused_bwd(ir::Op::kAvgPool2dBackward, {f32(pc.y()), f32(pc.x())}, fused_attrs);
    pool_bwd.in(0).fillUniform(rng, -1, 1);
    std::memcpy(fused_bwd.in(0).f32(), pool_bwd.in(0).f32(), sizeof(float) * pc.ySize());
    std::memcpy(pool_bwd.in(1).f32(), relu.out(0).f32(), sizeof(float) * pc.xSize());
    std::memcpy(fused_bwd.in(1).f32(), x, sizeof(float) * pc.xSize());
    fillGarbage(pool_bwd, rng);
    fillGarbage(fused_bwd, rng);
    pool_bwd.run();
    fused_bwd.run();
    SingleOp relu_bwd(ir::Op::kReluBackward, {f32(pc.x()), f32(pc.x())});
    std::memcpy(relu_bwd.in(0).f32(), pool_bwd.out(0).f32(), sizeof(float) * pc.xSize());
    std::memcpy(relu_bwd.in(1).f32(), relu.out(0).f32(), sizeof(float) * pc.xSize());
    relu_bwd.run();
    EXPECT_EQ(bits(fused_bwd.out(0)), bits(relu_bwd.out(0)));
  }
}

// As in PyTorch, a window holding a NaN pools to NaN and routes its gradient there, in
// the 2x2 loop and in the general one.
TEST(MaxPoolKernel, NanWins) {
  for (int64_t k : {2, 3}) {
    SCOPED_TRACE(k);
    PoolCase pc{1, 1, 4, 4, k, k == 2 ? 2 : 1, k == 2 ? 0 : 1};
    SingleOp fwd(ir::Op::kMaxPool2d, {f32(pc.x())}, pc.attrs());
    SingleOp bwd(ir::Op::kMaxPool2dBackward, {f32(pc.y()), f32(pc.x())}, pc.attrs());
    for (int64_t i = 0; i < 16; ++i) fwd.in(0).f32()[i] = bwd.in(1).f32()[i] = float(i);
    fwd.in(0).f32()[5] = bwd.in(1).f32()[5] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < pc.ySize(); ++i) bwd.in(0).f32()[i] = 1;
    fwd.run();
    bwd.run();
    // Window (0, 0) holds x[5] for both geometries; with k=2 window (1, 1) does not.
    EXPECT_TRUE(std::isnan(fwd.out(0).f32()[0]));
    EXPECT_GE(bwd.out(0).f32()[5], 1.0f);
    if (k == 2) {
      EXPECT_EQ(fwd.out(0).f32()[3], 15.0f);
      EXPECT_EQ(bwd.out(0).f32()[15], 1.0f);
      EXPECT_EQ(bwd.out(0).f32()[0], 0.0f);
    }
  }
}

std::vector<double> globalRef(const ir::Shape& s, const std::vector<double>& x) {
  int64_t hw = s[2] * s[3];
  std::vector<double> y(s[0] * s[1], 0.0);
  for (size_t i = 0; i < x.size(); ++i) y[i / hw] += x[i] / double(hw);
  return y;
}

std::vector<double> globalBackwardRef(const ir::Shape& s, const std::vector<double>& dy) {
  int64_t hw = s[2] * s[3];
  std::vector<double> dx(s[0] * s[1] * hw);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = dy[i / hw] / double(hw);
  return dx;
}

TEST(GlobalAvgPoolKernel, MatchesReference) {
  std::mt19937 rng(15);
  for (const ir::Shape& s : {ir::Shape{2, 3, 5, 5}, ir::Shape{4, 512, 4, 4}, ir::Shape{1, 7, 3, 6},
                             ir::Shape{2, 64, 1, 1}}) {
    SCOPED_TRACE(ir::toString(f32(s)));
    SingleOp fwd(ir::Op::kGlobalAvgPool, {f32(s)});
    fwd.in(0).fillUniform(rng);
    fillGarbage(fwd, rng);
    fwd.run();
    std::vector<double> y = globalRef(s, toDouble(fwd.in(0)));
    ASSERT_EQ(fwd.out(0).size(), static_cast<int64_t>(y.size()));
    EXPECT_LE(maxRelativeError(fwd.out(0).f32(), y.data(), fwd.out(0).size()), 1e-5);

    SingleOp bwd(ir::Op::kGlobalAvgPoolBackward, {f32({s[0], s[1], 1, 1}), f32(s)});
    bwd.in(0).fillUniform(rng);
    bwd.in(1).fillUniform(rng);
    fillGarbage(bwd, rng);
    bwd.run();
    std::vector<double> dx = globalBackwardRef(s, toDouble(bwd.in(0)));
    ASSERT_EQ(bwd.out(0).size(), static_cast<int64_t>(dx.size()));
    EXPECT_LE(maxRelativeError(bwd.out(0).f32(), dx.data(), bwd.out(0).size()), 1e-5);
  }
}

TEST(GlobalAvgPoolReference, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(16);
  std::uniform_real_distribution<double> d(-1, 1);
  ir::Shape s{2, 3, 4, 5};
  std::vector<double> x(2 * 3 * 4 * 5), dy(2 * 3);
  for (double& v : x) v = d(rng);
  for (double& v : dy) v = d(rng);
  auto f = [&](const std::vector<double>& in) { return globalRef(s, in); };
  EXPECT_LE(maxDiff(globalBackwardRef(s, dy), finiteDifference(f, dy, x, 1e-3)), 1e-9);
}

// avg_pool_rows.h's AVX-512 rows against the scalar 2x2 loop's formula, bit for bit: each
// window ((a + b) + (c + d)) * 0.25 of relu'd inputs, each share dy * 0.25 masked by
// relu_backward, zeros where no window reaches; inputs with zeros, -0.0, NaN and
// infinities, widths of one vector pair, more, and odd.
TEST(AvgPool2x2Rows, EqualTheScalarLoopBitForBit) {
  if (!backend::cpu::avx512Runs()) GTEST_SKIP() << "no AVX-512 on this host";
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  auto same = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (auto [h, w] : {std::pair<int64_t, int64_t>{26, 26}, {9, 9}, {6, 70}, {7, 33}, {4, 32}}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(absl::StrCat(h, "x", w, relu ? " relu" : ""));
      const int64_t planes = 3, oh = h / 2, ow = w / 2;
      std::vector<float> x(static_cast<size_t>(planes * h * w)), dy(planes * oh * ow);
      for (float& v : x) v = rng() % 8 == 0 ? special[rng() % 5] : d(rng);
      for (float& v : dy) v = rng() % 16 == 0 ? special[rng() % 5] : d(rng);
      std::vector<float> y(dy.size()), dx(x.size(), 7.0f);
      backend::cpu::avgPool2x2Rows(planes, h, w, relu, x.data(), y.data());
      backend::cpu::avgPool2x2BackwardRows(planes, h, w, relu, dy.data(), x.data(), dx.data());
      auto in = [&](int64_t p, int64_t r, int64_t c) {
        const float v = x[static_cast<size_t>((p * h + r) * w + c)];
        return relu ? backend::reluValue(v) : v;
      };
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t r = 0; r < h; ++r)
          for (int64_t c = 0; c < w; ++c) {
            const int64_t i = r / 2, j = c / 2;
            if (r < 2 * oh && c < 2 * ow && r % 2 == 0 && c % 2 == 0) {
              const float want =
                  ((in(p, r, c) + in(p, r, c + 1)) + (in(p, r + 1, c) + in(p, r + 1, c + 1))) *
                  0.25f;
              ASSERT_TRUE(same(y[static_cast<size_t>((p * oh + i) * ow + j)], want))
                  << "y at plane " << p << " window " << i << "," << j;
            }
            float share = 0.0f;
            if (r < 2 * oh && c < 2 * ow) {
              share = dy[static_cast<size_t>((p * oh + i) * ow + j)] * 0.25f;
              if (relu)
                share =
                    backend::reluBackwardValue(share, x[static_cast<size_t>((p * h + r) * w + c)]);
            }
            ASSERT_TRUE(same(dx[static_cast<size_t>((p * h + r) * w + c)], share))
                << "dx at plane " << p << " element " << r << "," << c;
          }
    }
  }
}

}  // namespace
}  // namespace tandem::testing
