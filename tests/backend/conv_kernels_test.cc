// conv2d, conv2d_backward_data and conv2d_backward_filter against naive loops in double
// precision, and the naive backward loops against central finite differences of the
// naive forward. Every shape runs with each strategy (plain tensors, blocked layouts with
// reorders, Winograd) and with the kernel table's own choice, with and without Winograd.
// Direct convolution is held to 1e-5; Winograd, which rounds through its input and
// output transforms, to kWinogradTolerance.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_info.h"
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
  int64_t n, c, h, w, o;
  ir::Hw k, stride, pad;  // per axis: one int, or {h, w}
  bool bias;
  int64_t groups = 1;  // c and o split into this many groups (c = o = groups: depthwise)

  int64_t oh() const { return (h + 2 * pad.h - k.h) / stride.h + 1; }
  int64_t ow() const { return (w + 2 * pad.w - k.w) / stride.w + 1; }
  ir::Shape x() const { return {n, c, h, w}; }
  ir::Shape wt() const { return {o, c / groups, k.h, k.w}; }
  ir::Shape y() const { return {n, o, oh(), ow()}; }
  std::string name() const {
    return absl::StrCat("n", n, "c", c, "h", h, "w", w, "o", o, "k", ir::toString(k.toAttr()), "s",
                        ir::toString(stride.toAttr()), "p", ir::toString(pad.toAttr()),
                        bias ? "b" : "", groups > 1 ? absl::StrCat("g", groups) : "");
  }
};

std::vector<double> toDouble(const float* p, int64_t n) { return std::vector<double>(p, p + n); }

/// Calls f(x_index, w_index, y_index) for every tap that reads a real (not padding) input
/// element: the one loop nest all references share. Output channel o reads the input
/// channels of its group, o / (O / groups); the filter holds C / groups of them per output.
template <typename F>
void forEachTap(const ConvCase& cc, F f) {
  const int64_t cg = cc.c / cc.groups, og = cc.o / cc.groups;
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t o = 0; o < cc.o; ++o)
      for (int64_t i = 0; i < cc.oh(); ++i)
        for (int64_t j = 0; j < cc.ow(); ++j)
          for (int64_t q = 0; q < cg; ++q)
            for (int64_t r = 0; r < cc.k.h; ++r)
              for (int64_t s = 0; s < cc.k.w; ++s) {
                int64_t hi = i * cc.stride.h - cc.pad.h + r, wi = j * cc.stride.w - cc.pad.w + s;
                if (hi < 0 || hi >= cc.h || wi < 0 || wi >= cc.w) continue;
                const int64_t c = o / og * cg + q;
                f(((n * cc.c + c) * cc.h + hi) * cc.w + wi,
                  ((o * cg + q) * cc.k.h + r) * cc.k.w + s,
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

/// Largest |a - b| over the largest |b|: Winograd's error scales with the magnitude of
/// the whole tile it transforms, not with each output element's own.
double errorRelativeToLargest(const float* a, const double* b, int64_t n) {
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    largest = std::max(largest, std::abs(b[i]));
  }
  return largest > 0 ? worst / largest : worst;
}

// Winograd F(4x4, 3x3) in f32, relative to the largest magnitude of the result. Measured
// (DISABLED_WinogradError below; oneDNN 2.6 jit_wino_4x3 on AVX-512; x uniform in [-1, 1)
// and, like post-ReLU activations, in [0, 1)): on the 3x3 stride-1 cases here at most
// 2.0e-6 forward, 1.6e-6 backward data, 7.4e-7 backward filter; on ResNet-18's stride-1
// 3x3 convolutions at N=32 at most 2.4e-6, 2.6e-6 and 1.5e-6. Direct (blocked) gives
// 3.4e-7 and 4.0e-7 for the first two and 3.9e-6 for backward filter, whose long sums
// dominate. Per element (maxRelativeError) Winograd reaches 1.3e-5 on these cases, as
// small outputs share their tile's rounding: hence the bound against the largest. 1e-5
// is 4x the worst measured and still fails a wrong transform or tile edge by far.
constexpr double kWinogradTolerance = 1e-5;

/// Whether oneDNN has its Winograd kernel on this CPU (jit_wino_4x3 needs AVX-512).
bool haveWinograd() { return backend::cpu::hostCpuInfo().isa.rfind("avx512_core", 0) == 0; }

bool usedWinograd(const backend::Kernel& k) {
  auto* p = dynamic_cast<const backend::cpu::ProgramKernel*>(&k);
  return p != nullptr && p->program().implementations().find("wino") != std::string::npos;
}

/// Whether oneDNN's Winograd kernel takes the case (3x3, stride 1, pad at most 1).
bool winogradShape(const ConvCase& cc) {
  return cc.k == ir::Hw(3) && cc.stride == ir::Hw(1) && cc.pad.h <= 1 && cc.pad.w <= 1 &&
         cc.groups == 1;
}

/// How a test case gets its kernel: a forced strategy, or the kernel table (kAuto) on a
/// context with or without Winograd.
struct StrategyParam {
  std::string name;
  ConvStrategy strategy;
  bool winograd = true;  // CpuContext::winograd() for kAuto
  /// Winograd may run.
  bool approximate() const {
    return strategy == ConvStrategy::kWinograd || (strategy == ConvStrategy::kAuto && winograd);
  }
};

/// The check of one result against its reference: kWinogradTolerance if the kernel ran
/// Winograd, else direct convolution's 1e-5.
void expectClose(bool winograd, const float* out, const double* ref, int64_t n) {
  if (winograd) {
    EXPECT_LE(errorRelativeToLargest(out, ref, n), kWinogradTolerance);
  } else {
    EXPECT_LE(maxRelativeError(out, ref, n), 1e-5);
  }
}

using Factory = KernelOr (*)(const KernelInit&, ConvStrategy);

/// Builds the kernel as `p` says and runs it over the op's buffers; results are first
/// filled with garbage so that a kernel which does not write every element fails. A forced
/// Winograd must really be Winograd where oneDNN has it, and direct Auto never is.
/// `winograd` (optional) says whether the kernel ran Winograd.
void runWith(SingleOp& op, Factory factory, const StrategyParam& p, const ConvCase& cc,
             std::mt19937& rng, bool* winograd = nullptr) {
  backend::cpu::CpuContext ctx(op.ctx().device(), op.ctx().seed(), p.winograd);
  KernelOr k = p.strategy == ConvStrategy::kAuto ? backend::cpu::makeKernel(op.node(), ctx)
                                                 : factory(KernelInit{op.node(), ctx}, p.strategy);
  ASSERT_TRUE(k.ok()) << k.status();
  if (p.strategy == ConvStrategy::kWinograd && haveWinograd()) {
    EXPECT_EQ(usedWinograd(**k), winogradShape(cc));
  }
  if (!p.approximate()) {
    EXPECT_FALSE(usedWinograd(**k));
  }
  if (winograd != nullptr) *winograd = usedWinograd(**k);
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
  float bound = static_cast<float>(std::sqrt(3.0 / double(cc.c / cc.groups * cc.k.h * cc.k.w)));
  w.fillUniform(rng, -bound, bound);
}

const std::vector<ConvCase> kCases = {
    {2, 3, 7, 7, 4, 3, 1, 1, true},
    {2, 3, 8, 8, 5, 3, 2, 1, false},
    {1, 4, 9, 9, 6, 5, 2, 2, true},
    {3, 2, 6, 9, 3, 3, 1, 0, true},
    {2, 5, 11, 11, 7, 3, 3, 2, false},
    {1, 1, 28, 28, 20, 3, 1, 0, true},
    {2, 20, 13, 13, 50, 5, 1, 0, true},
    // kGemm's columns take 400 KiB an image here (1,600 rows of 64 pixels), so the batch
    // is a chunk of 2 side by side (gemm_conv.cc: about 1 MiB) and a last one of 1.
    {3, 64, 12, 12, 8, 5, 1, 0, true},
    {2, 16, 8, 8, 32, 3, 2, 1, false},
    {2, 64, 7, 7, 64, 3, 1, 1, false},
    {2, 8, 8, 8, 16, 1, 2, 0, false},
    {1, 3, 5, 5, 2, 1, 1, 0, true},
    {2, 24, 10, 10, 40, 3, 1, 1, true},
    {1, 2, 4, 4, 3, 1, 1, 1, true},
    {2, 12, 9, 9, 30, 5, 1, 2, false},
    // Grouped: 2 groups; ResNeXt's 4 channels per group; ShuffleNet's grouped 1x1.
    {2, 4, 7, 7, 6, 3, 1, 1, true, 2},
    {2, 32, 6, 6, 32, 3, 1, 1, false, 8},
    {2, 12, 5, 5, 6, 1, 1, 0, true, 3},
    // Depthwise: MobileNet's 3x3 at stride 1 and 2, 16 and 32 channels (whole channel
    // blocks) and 8; EfficientNet's 5x5; a channel multiplier of 2 (8 outputs of 4).
    {2, 32, 10, 10, 32, 3, 1, 1, true, 32},
    {2, 8, 9, 9, 8, 3, 2, 1, false, 8},
    {1, 16, 11, 11, 16, 5, 2, 2, true, 16},
    {1, 4, 6, 6, 8, 3, 1, 1, false, 4},
    // Windows whose height and width differ: Inception's 1x7 / 7x1 pair, a 3x2 filter at
    // strides (2, 1) and padding (1, 0), a grouped 1x3 and a depthwise 5x1.
    {2, 3, 7, 6, 4, {3, 2}, {2, 1}, {1, 0}, true},
    {1, 8, 9, 9, 12, {1, 7}, 1, {0, 3}, false},
    {1, 8, 9, 9, 12, {7, 1}, 1, {3, 0}, true},
    {1, 4, 9, 8, 6, {1, 3}, 1, {0, 1}, false, 2},
    {2, 16, 7, 7, 16, {5, 1}, {1, 2}, {2, 0}, true, 16},
};

class ConvKernelTest : public ::testing::TestWithParam<StrategyParam> {};

TEST_P(ConvKernelTest, ForwardMatchesReference) {
  std::mt19937 rng(1);
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name());
    bool winograd = false;
    std::vector<ir::TensorType> types{f32(cc.x()), f32(cc.wt())};
    if (cc.bias) types.push_back(f32({cc.o}));
    SingleOp op(ir::Op::kConv2d, types,
                {{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}, {"groups", cc.groups}});
    for (size_t i = 0; i < types.size(); ++i) op.in(i).fillUniform(rng);
    fillFilter(op.in(1), cc, rng);
    runWith(op, backend::cpu::makeConv2dKernelWithStrategy, GetParam(), cc, rng, &winograd);
    std::vector<double> b = cc.bias ? toDouble(op.in(2).f32(), cc.o) : std::vector<double>();
    std::vector<double> ref =
        convRef(cc, toDouble(op.in(0).f32(), op.in(0).size()),
                toDouble(op.in(1).f32(), op.in(1).size()), cc.bias ? &b : nullptr);
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(ref.size()));
    expectClose(winograd, op.out(0).f32(), ref.data(), op.out(0).size());
  }
}

TEST_P(ConvKernelTest, BackwardDataMatchesReference) {
  std::mt19937 rng(2);
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name());
    bool winograd = false;
    SingleOp op(ir::Op::kConv2dBackwardData, {f32(cc.y()), f32(cc.wt()), f32(cc.x())},
                {{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}, {"groups", cc.groups}});
    for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
    fillFilter(op.in(1), cc, rng);
    runWith(op, backend::cpu::makeConv2dBackwardDataKernelWithStrategy, GetParam(), cc, rng,
            &winograd);
    std::vector<double> ref = convBackwardDataRef(cc, toDouble(op.in(0).f32(), op.in(0).size()),
                                                  toDouble(op.in(1).f32(), op.in(1).size()));
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(ref.size()));
    expectClose(winograd, op.out(0).f32(), ref.data(), op.out(0).size());
  }
}

TEST_P(ConvKernelTest, BackwardFilterMatchesReference) {
  std::mt19937 rng(3);
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name());
    bool winograd = false;
    SingleOp op(ir::Op::kConv2dBackwardFilter, {f32(cc.y()), f32(cc.x()), f32(cc.wt())},
                {{"stride", cc.stride.toAttr()},
                 {"pad", cc.pad.toAttr()},
                 {"groups", cc.groups},
                 {"bias", cc.bias}});
    for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
    runWith(op, backend::cpu::makeConv2dBackwardFilterKernelWithStrategy, GetParam(), cc, rng,
            &winograd);
    std::vector<double> dy = toDouble(op.in(0).f32(), op.in(0).size());
    std::vector<double> dw =
        convBackwardFilterRef(cc, dy, toDouble(op.in(1).f32(), op.in(1).size()));
    ASSERT_EQ(op.out(0).size(), static_cast<int64_t>(dw.size()));
    expectClose(winograd, op.out(0).f32(), dw.data(), op.out(0).size());
    if (cc.bias) {
      std::vector<double> db = convBackwardBiasRef(cc, dy);
      expectClose(winograd, op.out(1).f32(), db.data(), cc.o);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, ConvKernelTest,
                         ::testing::Values(StrategyParam{"Auto", ConvStrategy::kAuto},
                                           StrategyParam{"AutoDirect", ConvStrategy::kAuto,
                                                         /*winograd=*/false},
                                           StrategyParam{"Plain", ConvStrategy::kPlain},
                                           StrategyParam{"Blocked", ConvStrategy::kBlocked},
                                           StrategyParam{"Winograd", ConvStrategy::kWinograd},
                                           StrategyParam{"Gemm", ConvStrategy::kGemm},
                                           StrategyParam{"Taps", ConvStrategy::kTaps}),
                         [](const auto& info) { return info.param.name; });

// The backward references are the gradients of the forward reference.
TEST(ConvReference, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> d(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<double> v(n);
    for (double& e : v) e = d(rng);
    return v;
  };
  for (const ConvCase& cc :
       {ConvCase{2, 2, 5, 6, 3, 3, 2, 1, true}, ConvCase{1, 3, 6, 6, 2, 3, 1, 2, true},
        ConvCase{2, 4, 5, 5, 6, 3, 1, 1, true, 2}}) {
    SCOPED_TRACE(cc.name());
    std::vector<double> x = random(count(cc.x())), w = random(count(cc.wt())), b = random(cc.o),
                        dy = random(count(cc.y()));
    EXPECT_LE(maxDiff(convBackwardDataRef(cc, dy, w), finiteDifference(cc, dy, x, w, b, 0)), 1e-8);
    EXPECT_LE(maxDiff(convBackwardFilterRef(cc, dy, x), finiteDifference(cc, dy, x, w, b, 1)),
              1e-8);
    EXPECT_LE(maxDiff(convBackwardBiasRef(cc, dy), finiteDifference(cc, dy, x, w, b, 2)), 1e-8);
  }
}

/// The three passes of `cc` with `p`'s kernels, filled as the tests fill them except that
/// x is uniform in [x_lo, 1) (0: post-ReLU activations). Per pass (forward, backward
/// data, backward filter) the result's errorRelativeToLargest against the double
/// reference, then the three maxRelativeError.
std::vector<double> passErrors(const ConvCase& cc, const StrategyParam& p, float x_lo,
                               std::mt19937& rng) {
  SingleOp::Attrs attrs{{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}};
  std::vector<double> largest, floor1;
  auto note = [&](Buffer& out, const std::vector<double>& ref) {
    largest.push_back(errorRelativeToLargest(out.f32(), ref.data(), out.size()));
    floor1.push_back(maxRelativeError(out.f32(), ref.data(), out.size()));
  };
  {
    SingleOp op(ir::Op::kConv2d, {f32(cc.x()), f32(cc.wt())}, attrs);
    op.in(0).fillUniform(rng, x_lo, 1);
    fillFilter(op.in(1), cc, rng);
    runWith(op, backend::cpu::makeConv2dKernelWithStrategy, p, cc, rng);
    note(op.out(0), convRef(cc, toDouble(op.in(0).f32(), op.in(0).size()),
                            toDouble(op.in(1).f32(), op.in(1).size()), nullptr));
  }
  {
    SingleOp op(ir::Op::kConv2dBackwardData, {f32(cc.y()), f32(cc.wt()), f32(cc.x())}, attrs);
    op.in(0).fillUniform(rng);
    fillFilter(op.in(1), cc, rng);
    runWith(op, backend::cpu::makeConv2dBackwardDataKernelWithStrategy, p, cc, rng);
    note(op.out(0), convBackwardDataRef(cc, toDouble(op.in(0).f32(), op.in(0).size()),
                                        toDouble(op.in(1).f32(), op.in(1).size())));
  }
  {
    attrs.emplace_back("bias", false);
    SingleOp op(ir::Op::kConv2dBackwardFilter, {f32(cc.y()), f32(cc.x()), f32(cc.wt())}, attrs);
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng, x_lo, 1);
    runWith(op, backend::cpu::makeConv2dBackwardFilterKernelWithStrategy, p, cc, rng);
    note(op.out(0), convBackwardFilterRef(cc, toDouble(op.in(0).f32(), op.in(0).size()),
                                          toDouble(op.in(1).f32(), op.in(1).size())));
  }
  largest.insert(largest.end(), floor1.begin(), floor1.end());
  return largest;
}

// The measurement behind kWinogradTolerance (slow: double loops over ResNet-18's shapes):
//   build/tests/backend_tests --gtest_also_run_disabled_tests --gtest_filter='*WinogradError'
TEST(ConvKernel, DISABLED_WinogradError) {
  std::mt19937 rng(7);
  std::vector<ConvCase> cases;
  for (const ConvCase& cc : kCases)
    if (winogradShape(cc)) cases.push_back(cc);
  // ResNet-18's stride-1 3x3 convolutions: the stem and stages 1 to 4.
  for (auto [c, hw, o] : {std::array<int64_t, 3>{1, 28, 64},
                          {64, 28, 64},
                          {128, 14, 128},
                          {256, 7, 256},
                          {512, 4, 512}})
    cases.push_back({32, c, hw, hw, o, 3, 1, 1, false});
  std::printf(
      "error relative to the largest magnitude, Winograd (direct blocked); "
      "[Winograd's maxRelativeError]\n");
  for (float x_lo : {-1.0f, 0.0f}) {
    std::printf("x uniform in [%g, 1)\n", x_lo);
    for (const ConvCase& cc : cases) {
      std::vector<double> d = passErrors(cc, {"Blocked", ConvStrategy::kBlocked}, x_lo, rng);
      std::vector<double> w = passErrors(cc, {"Winograd", ConvStrategy::kWinograd}, x_lo, rng);
      std::printf(
          "%-24s fwd %.1e (%.1e) [%.1e]  bwd_data %.1e (%.1e) [%.1e]  bwd_filter %.1e (%.1e) "
          "[%.1e]\n",
          cc.name().c_str(), w[0], d[0], w[3], w[1], d[1], w[4], w[2], d[2], w[5]);
    }
  }
}

// The Winograd kernels' gradients against central differences of the forward reference.
TEST(ConvKernel, WinogradBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(6);
  StrategyParam winograd{"Winograd", ConvStrategy::kWinograd};
  for (const ConvCase& cc :
       {ConvCase{1, 8, 6, 6, 8, 3, 1, 1, true}, ConvCase{2, 3, 7, 5, 4, 3, 1, 0, true}}) {
    SCOPED_TRACE(cc.name());
    SingleOp data(ir::Op::kConv2dBackwardData, {f32(cc.y()), f32(cc.wt()), f32(cc.x())},
                  {{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}});
    SingleOp filter(ir::Op::kConv2dBackwardFilter, {f32(cc.y()), f32(cc.x()), f32(cc.wt())},
                    {{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}, {"bias", true}});
    data.in(0).fillUniform(rng);
    fillFilter(data.in(1), cc, rng);
    data.in(2).fillUniform(rng);
    std::copy_n(data.in(0).f32(), data.in(0).size(), filter.in(0).f32());  // dy
    std::copy_n(data.in(2).f32(), data.in(2).size(), filter.in(1).f32());  // x
    std::copy_n(data.in(1).f32(), data.in(1).size(), filter.in(2).f32());  // w
    runWith(data, backend::cpu::makeConv2dBackwardDataKernelWithStrategy, winograd, cc, rng);
    runWith(filter, backend::cpu::makeConv2dBackwardFilterKernelWithStrategy, winograd, cc, rng);
    std::vector<double> dy = toDouble(data.in(0).f32(), data.in(0).size()),
                        w = toDouble(data.in(1).f32(), data.in(1).size()),
                        x = toDouble(data.in(2).f32(), data.in(2).size()), b(cc.o, 0.5);
    std::vector<double> dx = finiteDifference(cc, dy, x, w, b, 0),
                        dw = finiteDifference(cc, dy, x, w, b, 1),
                        db = finiteDifference(cc, dy, x, w, b, 2);
    EXPECT_LE(errorRelativeToLargest(data.out(0).f32(), dx.data(), data.out(0).size()),
              kWinogradTolerance);
    EXPECT_LE(errorRelativeToLargest(filter.out(0).f32(), dw.data(), filter.out(0).size()),
              kWinogradTolerance);
    EXPECT_LE(errorRelativeToLargest(filter.out(1).f32(), db.data(), cc.o), kWinogradTolerance);
  }
}

// A CPU device's kernels take Winograd for ResNet-18's stage-1 convolution in every pass,
// and never when the CPU options' conv_algorithm is kDirect.
TEST(ConvKernel, DevicesTakeWinogradUnlessDirectIsAsked) {
  if (!haveWinograd()) GTEST_SKIP() << "oneDNN has no Winograd kernel on this CPU";
  ConvCase cc{32, 64, 28, 28, 64, 3, 1, 1, false};
  SingleOp::Attrs attrs{{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}};
  SingleOp fwd(ir::Op::kConv2d, {f32(cc.x()), f32(cc.wt())}, attrs);
  SingleOp data(ir::Op::kConv2dBackwardData, {f32(cc.y()), f32(cc.wt()), f32(cc.x())}, attrs);
  attrs.emplace_back("bias", false);
  SingleOp filter(ir::Op::kConv2dBackwardFilter, {f32(cc.y()), f32(cc.x()), f32(cc.wt())}, attrs);
  for (SingleOp* op : {&fwd, &data, &filter}) {
    SCOPED_TRACE(op->node().opName());
    for (auto algorithm : {backend::ConvAlgorithm::kAuto, backend::ConvAlgorithm::kDirect}) {
      const backend::Settings own{{"conv_algorithm", backend::toString(algorithm)}};
      auto device = backend::cpu::cpuBackend().createDevice(op->ctx().device(), {.settings = &own});
      ASSERT_TRUE(device.ok()) << device.status();
      auto k = (*device)->makeKernel(op->node());
      ASSERT_TRUE(k.ok()) << k.status();
      EXPECT_EQ(usedWinograd(**k), algorithm == backend::ConvAlgorithm::kAuto);
    }
  }
}

// Primitives are made once and reused: a second run over the same inputs gives the same
// bits (and a run over new inputs does not see the old ones).
TEST(ConvKernel, RunsTwiceIdentically) {
  std::mt19937 rng(5);
  for (ConvStrategy strategy :
       {ConvStrategy::kPlain, ConvStrategy::kBlocked, ConvStrategy::kWinograd}) {
    ConvCase cc{2, 16, 9, 9, 24, 3, 1, 1, true};
    SingleOp op(ir::Op::kConv2dBackwardFilter, {f32(cc.y()), f32(cc.x()), f32(cc.wt())},
                {{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}, {"bias", true}});
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
              {{"stride", cc.stride.toAttr()}, {"pad", cc.pad.toAttr()}});
  for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
  op.run();
  std::vector<float> first(op.out(0).f32(), op.out(0).f32() + op.out(0).size());
  op.run();
  EXPECT_EQ(first, std::vector<float>(op.out(0).f32(), op.out(0).f32() + op.out(0).size()));
}

// The kernels compute in f32; another dtype is an error naming the node, not a crash.
}  // namespace
}  // namespace tandem::testing
