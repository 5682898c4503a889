// The CUDA backend's per-element math (backend/cuda/*_math.h: compiled for the GPU and,
// here, for the host) over the PyTorch cases of NaN, +-inf, -0.0 and subnormals that the
// CPU kernels are held to (nonfinite_ops_test.cc; tests/data/gen_nonfinite_refs.py). The
// kernels are replayed on the host as the .cu files compose the math: one thread's
// function per element, a warp's butterflies in their fixed pairing (warp_reduce.cuh),
// a channel's sums in double. Built without CUDA, so every build checks that the GPU's
// math propagates NaN as PyTorch does.

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/cuda/dropout_math.h"
#include "backend/cuda/elementwise_math.h"
#include "backend/cuda/host_device.h"
#include "backend/cuda/loss_math.h"
#include "backend/cuda/norm_math.h"
#include "backend/cuda/optimizer_math.h"
#include "backend/cuda/pool_params.h"
#include "backend/cuda/row_math.h"
#include "backend/dropout_mask.h"
#include "backend/unary_math.h"
#include "gtest/gtest.h"
#include "ir/attrs.h"
#include "ir/op_info.h"
#include "nonfinite_case.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;

constexpr int kLanes = 32;  // a warp

NonfiniteCase mustLoad(const std::string& name) {
  auto c = loadNonfiniteCase(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : NonfiniteCase{};
}

std::vector<float> floats(const CaseTensor& t) { return {t.values.begin(), t.values.end()}; }

/// v as a kernel stores it into a tensor of the case's dtype (bf16: rounded once).
double stored(float v, const CaseTensor& like) {
  return like.dtype == "bf16" ? cu::bf16ToFloat(cu::floatToBf16(v)) : v;
}

/// A warp's butterfly (warp_reduce.cuh): lane l combines with lane l ^ o for o = 16, 8, ...
/// 1, all lanes at once; lane 0's result.
template <typename T, typename F>
T butterfly(std::vector<T> v, F combine) {
  for (int o = kLanes / 2; o > 0; o /= 2) {
    std::vector<T> next(v.size());
    for (int l = 0; l < kLanes; ++l)
      next[static_cast<size_t>(l)] =
          combine(v[static_cast<size_t>(l)], v[static_cast<size_t>(l ^ o)]);
    v = std::move(next);
  }
  return v[0];
}
float warpSum(const std::vector<float>& v) {
  return butterfly(v, [](float self, float other) { return self + other; });
}
float warpMax(const std::vector<float>& v) {
  return butterfly(v, [](float self, float other) { return other > self ? other : self; });
}

void expectAgrees(const NonfiniteCase& c, const std::string& name, const std::vector<double>& got,
                  const std::string& what) {
  EXPECT_EQ(disagreement(got, c.tensor(name).values, caseTolerance(c), caseExact(c)), "")
      << c.name() << ": " << what << " (" << name << ")";
}

// ---- elementwise (backend/unary_math.h's structs, as elementwise.cu maps them) --------

template <typename Math>
void unaryCases(const std::string& op) {
  for (const std::string suffix : {"", "_bf16"}) {
    const NonfiniteCase c = mustLoad(op + suffix);
    std::vector<double> y;
    for (float x : floats(c.tensor("in0"))) y.push_back(stored(Math::forward(x), c.tensor("out0")));
    expectAgrees(c, "out0", y, "forward");
  }
  const NonfiniteCase b = mustLoad(op + "_backward");
  const std::vector<float> dy = floats(b.tensor("in0")), v = floats(b.tensor("in1"));
  std::vector<double> dx;
  for (size_t i = 0; i < dy.size(); ++i)
    dx.push_back(stored(Math::backward(dy[i], v[i]), b.tensor("out0")));
  expectAgrees(b, "out0", dx, "backward");
}

TEST(CudaMathNonFinite, UnaryOpsMatchPyTorch) {
  // Every op of the spec's class unary_elementwise, as elementwise.cu instantiates them.
#define TANDEM_UNARY_CASES(Name) \
  unaryCases<backend::Name##Math>(std::string(ir::opInfo(ir::Op::k##Name).name));
  TANDEM_UNARY_ELEMENTWISE_OPS(TANDEM_UNARY_CASES)
#undef TANDEM_UNARY_CASES
  const NonfiniteCase rb = mustLoad("relu_backward_bf16");
  const std::vector<float> dy = floats(rb.tensor("in0")), y = floats(rb.tensor("in1"));
  std::vector<double> dx;
  for (size_t i = 0; i < dy.size(); ++i)
    dx.push_back(stored(backend::reluBackwardValue(dy[i], y[i]), rb.tensor("out0")));
  expectAgrees(rb, "out0", dx, "relu_backward in bf16");
}

// dropout: PyTorch's x * noise; the mask is the kernel's own (DropoutMask::keeps).
TEST(CudaMathNonFinite, DropoutMatchesPyTorch) {
  const NonfiniteCase c = mustLoad("dropout");
  const std::vector<float> x = floats(c.tensor("in0"));
  const int64_t rows = c.tensor("in0").shape[0], per_row = c.tensor("in0").shape[1];
  const int32_t step = static_cast<int32_t>(c.tensor("in1").values[0]);
  const backend::DropoutMask mask = backend::dropoutMask(
      /*seed=*/7, step, static_cast<uint32_t>(c.integer("mask_id")), c.num("p"));
  std::vector<float> y(x.size());
  const int64_t groups = (per_row + 7) / 8;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g)
      cu::dropoutGroup(mask, 0, per_row, r, g, x.data(), y.data());
  // Which elements the mask keeps, from the same groups over ones.
  std::vector<float> ones(x.size(), 1.0f), kept(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g)
      cu::dropoutGroup(mask, 0, per_row, r, g, ones.data(), kept.data());
  std::vector<double> got, want;
  int drops = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool keep = kept[i] != 0.0f;
    drops += keep ? 0 : 1;
    got.push_back(y[i]);
    want.push_back(keep ? c.tensor("out0_kept").values[i] : c.tensor("out0_dropped").values[i]);
  }
  ASSERT_GT(drops, 0);
  EXPECT_EQ(disagreement(got, want, 0, /*exact=*/true), "");
}

// ---- pooling (pool_math.h, one output or input element per thread) ---------------------

/// A case's window attribute: `3`, or `3,2` for (height, width).
ir::Hw hwOf(const NonfiniteCase& f, const std::string& name) {
  const std::vector<std::string> parts = absl::StrSplit(f.text(name), ',');
  int64_t h = 0, w = 0;
  EXPECT_TRUE(absl::SimpleAtoi(parts.front(), &h) && absl::SimpleAtoi(parts.back(), &w))
      << name << "=" << f.text(name);
  return ir::Hw(h, w);
}

TEST(CudaMathNonFinite, PoolingMatchesPyTorch) {
  for (const std::string tag :
       {"k2s2p0", "k3s2p1", "k3x2s2x1p1x0", "k2x1s2x1p0x0", "k3x2s2x2p1x1_ceil"}) {
    for (const std::string kind : {"max", "avg"}) {
      const NonfiniteCase f = mustLoad(kind + "_pool2d_" + tag);
      const CaseTensor& x = f.tensor("in0");
      const CaseTensor& y = f.tensor("out0");
      const cu::PoolParams p = cu::poolParams(ir::Shape(x.shape.begin(), x.shape.end()),
                                              ir::Shape(y.shape.begin(), y.shape.end()),
                                              hwOf(f, "kernel"), hwOf(f, "stride"), hwOf(f, "pad"));
      const std::vector<float> xs = floats(x);
      std::vector<double> got;
      for (int64_t pl = 0; pl < p.planes; ++pl)
        for (int64_t i = 0; i < p.oh; ++i)
          for (int64_t j = 0; j < p.ow; ++j) {
            const float* plane = xs.data() + pl * p.h * p.w;
            got.push_back(kind == "max" ? cu::maxPoolAt(plane, p, i, j)
                                        : cu::avgPoolAt(plane, p, i, j));
          }
      expectAgrees(f, "out0", got, "forward");
      const NonfiniteCase b = mustLoad(kind + "_pool2d_backward_" + tag);
      const std::vector<float> dy = floats(b.tensor("in0"));
      std::vector<double> dx;
      for (int64_t pl = 0; pl < p.planes; ++pl)
        for (int64_t r = 0; r < p.h; ++r)
          for (int64_t col = 0; col < p.w; ++col) {
            const float* dyp = dy.data() + pl * p.oh * p.ow;
            const float* xp = xs.data() + pl * p.h * p.w;
            dx.push_back(kind == "max" ? cu::maxPoolBackwardAt(dyp, xp, p, r, col)
                                       : cu::avgPoolBackwardAt(dyp, xp, p, r, col));
          }
      expectAgrees(b, "out0", dx, "backward");
    }
  }
  const NonfiniteCase h = mustLoad("max_pool2d_bf16");
  const CaseTensor& x = h.tensor("in0");
  std::vector<uint16_t> bits;
  for (double v : x.values) bits.push_back(cu::floatToBf16(static_cast<float>(v)));
  const ir::Shape xs(x.shape.begin(), x.shape.end());
  const cu::PoolParams p = cu::poolParams(xs, {xs[0], xs[1], xs[2] / 2, xs[3] / 2}, 2, 2, 0);
  std::vector<double> got;
  for (int64_t pl = 0; pl < p.planes; ++pl)
    for (int64_t i = 0; i < p.oh; ++i)
      for (int64_t j = 0; j < p.ow; ++j)
        got.push_back(
            stored(cu::maxPoolAt(bits.data() + pl * p.h * p.w, p, i, j), h.tensor("out0")));
  expectAgrees(h, "out0", got, "bf16 forward");
}

// ---- rows (row_math.h, one warp per row as rows.cu runs it) ---------------------------

struct Split {
  int64_t outer, axis, inner;
};
Split split(const CaseTensor& t, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  if (axis < 0) axis += rank;
  Split s{1, t.shape[static_cast<size_t>(axis)], 1};
  for (int64_t d = 0; d < axis; ++d) s.outer *= t.shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) s.inner *= t.shape[static_cast<size_t>(d)];
  return s;
}

TEST(CudaMathNonFinite, SoftmaxMatchesPyTorch) {
  for (const std::string op : {"softmax", "log_softmax"}) {
    const bool log = op == "log_softmax";
    for (const std::string suffix : {"", "_middle", "_bf16"}) {
      const NonfiniteCase c = mustLoad(op + suffix);
      const CaseTensor& in = c.tensor("in0");
      const Split d = split(in, c.integer("axis"));
      const std::vector<float> x = floats(in);
      std::vector<double> y(x.size());
      for (int64_t q = 0; q < d.outer * d.inner; ++q) {
        const int64_t base = q / d.inner * d.axis * d.inner + q % d.inner;
        const float* row = x.data() + base;
        std::vector<float> lane(kLanes);
        for (int l = 0; l < kLanes; ++l)
          lane[static_cast<size_t>(l)] = cu::laneRowMax(row, d.axis, d.inner, l, kLanes);
        const float max = warpMax(lane);
        for (int l = 0; l < kLanes; ++l)
          lane[static_cast<size_t>(l)] = cu::laneRowExpSum(row, d.axis, d.inner, max, l, kLanes);
        const float sum = warpSum(lane);
        for (int64_t j = 0; j < d.axis; ++j)
          y[static_cast<size_t>(base + j * d.inner)] =
              stored(cu::softmaxOut(row[j * d.inner], max, sum, log), c.tensor("out0"));
      }
      expectAgrees(c, "out0", y, "forward");
    }
    const NonfiniteCase b = mustLoad(op + "_backward");
    const Split d = split(b.tensor("in0"), b.integer("axis"));
    const std::vector<float> dy = floats(b.tensor("in0")), y = floats(b.tensor("in1"));
    std::vector<double> dx(dy.size());
    for (int64_t q = 0; q < d.outer * d.inner; ++q) {
      const int64_t base = q / d.inner * d.axis * d.inner + q % d.inner;
      std::vector<float> lane(kLanes);
      for (int l = 0; l < kLanes; ++l)
        lane[static_cast<size_t>(l)] = cu::laneSoftmaxGradSum(y.data() + base, dy.data() + base,
                                                              d.axis, d.inner, log, l, kLanes);
      const float sum = warpSum(lane);
      for (int64_t j = 0; j < d.axis; ++j) {
        const size_t at = static_cast<size_t>(base + j * d.inner);
        dx[at] = cu::softmaxGradIn(y[at], dy[at], sum, log);
      }
    }
    expectAgrees(b, "out0", dx, "backward");
  }
}

TEST(CudaMathNonFinite, LayerNormMatchesPyTorch) {
  const NonfiniteCase c = mustLoad("layer_norm");
  const int64_t rows = c.tensor("in0").shape[0], width = c.tensor("in0").shape[1];
  const float n = static_cast<float>(width), eps = static_cast<float>(c.num("eps"));
  const std::vector<float> x = floats(c.tensor("in0")), gamma = floats(c.tensor("in1")),
                           beta = floats(c.tensor("in2"));
  std::vector<double> y, mean, var;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * width;
    std::vector<float> lane(kLanes);
    for (int l = 0; l < kLanes; ++l)
      lane[static_cast<size_t>(l)] = cu::laneRowSum(row, width, l, kLanes);
    const float m = warpSum(lane) / n;
    for (int l = 0; l < kLanes; ++l)
      lane[static_cast<size_t>(l)] = cu::laneRowSquaredDeviation(row, width, m, l, kLanes);
    const float v = warpSum(lane) / n;
    const float rstd = cu::layerNormRstd(v, eps);
    for (int64_t j = 0; j < width; ++j)
      y.push_back(cu::layerNormOut(row[j], m, rstd, gamma[static_cast<size_t>(j)],
                                   beta[static_cast<size_t>(j)]));
    mean.push_back(m);
    var.push_back(v);
  }
  expectAgrees(c, "out0", y, "y");
  expectAgrees(c, "out1", mean, "mean");
  expectAgrees(c, "out2", var, "var");

  const NonfiniteCase b = mustLoad("layer_norm_backward");
  const std::vector<float> dy = floats(b.tensor("in0")), bx = floats(b.tensor("in1")),
                           bmean = floats(b.tensor("in2")), bvar = floats(b.tensor("in3")),
                           bgamma = floats(b.tensor("in4"));
  std::vector<double> dx, dgamma, dbeta;
  for (int64_t r = 0; r < rows; ++r) {
    const float m = bmean[static_cast<size_t>(r)],
                rstd = cu::layerNormRstd(bvar[static_cast<size_t>(r)], eps);
    std::vector<float> g(kLanes), gx(kLanes);
    for (int l = 0; l < kLanes; ++l) {
      const cu::LayerNormGradSums s = cu::laneLayerNormGradSums(
          bx.data() + r * width, dy.data() + r * width, bgamma.data(), width, m, rstd, l, kLanes);
      g[static_cast<size_t>(l)] = s.g;
      gx[static_cast<size_t>(l)] = s.gx;
    }
    const float mean_g = warpSum(g) / n, mean_gx = warpSum(gx) / n;
    for (int64_t j = 0; j < width; ++j) {
      const size_t at = static_cast<size_t>(r * width + j);
      dx.push_back(cu::layerNormGradIn(bx[at], dy[at], bgamma[static_cast<size_t>(j)], m, rstd,
                                       mean_g, mean_gx));
    }
  }
  for (int64_t col = 0; col < width; ++col) {
    const cu::LayerNormParamGrads p = cu::layerNormParamGrads(bx.data(), dy.data(), bmean.data(),
                                                              bvar.data(), eps, rows, width, col);
    dgamma.push_back(p.dgamma);
    dbeta.push_back(p.dbeta);
  }
  expectAgrees(b, "out0", dx, "dx");
  expectAgrees(b, "out1", dgamma, "dgamma");
  expectAgrees(b, "out2", dbeta, "dbeta");
}

// accuracy (loss.cu): each lane's candidate, the warp's butterfly of betterOf, the class.
TEST(CudaMathNonFinite, AccuracyTakesArgMaxAsPyTorch) {
  for (const std::string name : {"accuracy", "accuracy_misses"}) {
    const NonfiniteCase c = mustLoad(name);
    const int64_t rows = c.tensor("in0").shape[0], classes = c.tensor("in0").shape[1];
    const std::vector<float> logits = floats(c.tensor("in0"));
    const std::vector<int32_t> labels = c.tensor("in1").i32();
    int32_t correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[static_cast<size_t>(r)] < 0) continue;
      const float* row = logits.data() + r * classes;
      std::vector<cu::ArgMax> lane;
      for (int l = 0; l < kLanes; ++l) lane.push_back(cu::laneArgMax(row, classes, l, kLanes));
      const cu::ArgMax best =
          butterfly(lane, [](cu::ArgMax a, cu::ArgMax b) { return cu::betterOf(a, b); });
      correct += cu::predictedClass(best) == labels[static_cast<size_t>(r)] ? 1 : 0;
    }
    EXPECT_EQ(correct, static_cast<int32_t>(c.tensor("out0").values[0])) << name;
  }
}

// ---- batch norm (norm_math.h, as norm.cu composes it) ---------------------------------

/// [N, C, HW] of a case tensor.
struct Nchw {
  int64_t n, c, hw;
  explicit Nchw(const CaseTensor& t) : n(t.shape[0]), c(t.shape[1]), hw(t.shape[2] * t.shape[3]) {}
  size_t at(int64_t img, int64_t ch, int64_t i) const {
    return static_cast<size_t>((img * c + ch) * hw + i);
  }
};

/// channelMoments: the sum, then squared deviations from the float mean, in double.
struct Moments {
  double sum, sq;
  float fmean;
};
Moments moments(const std::vector<float>& x, const Nchw& s, int64_t ch) {
  double sum = 0;
  for (int64_t img = 0; img < s.n; ++img)
    for (int64_t i = 0; i < s.hw; ++i) sum += x[s.at(img, ch, i)];
  const float fmean = static_cast<float>(sum / static_cast<double>(s.n * s.hw));
  double sq = 0;
  for (int64_t img = 0; img < s.n; ++img)
    for (int64_t i = 0; i < s.hw; ++i) {
      const float d = x[s.at(img, ch, i)] - fmean;
      sq += static_cast<double>(d * d);
    }
  return {sum, sq, fmean};
}

TEST(CudaMathNonFinite, BatchNormMatchesPyTorch) {
  {  // batch_norm in training (batchNormMomentsKernel, normalizeKernel)
    const NonfiniteCase c = mustLoad("batch_norm_training");
    const Nchw s(c.tensor("in0"));
    const std::vector<float> x = floats(c.tensor("in0")), gamma = floats(c.tensor("in1")),
                             beta = floats(c.tensor("in2"));
    std::vector<float> rm = floats(c.tensor("in3")), rv = floats(c.tensor("in4"));
    std::vector<double> y(x.size()), save_mean, save_invstd;
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const Moments mo = moments(x, s, ch);
      const double m = static_cast<double>(s.n * s.hw), mean = mo.sum / m;
      const double var = cu::momentsVar(m, mo.sum, mo.sq, mo.fmean);
      const size_t k = static_cast<size_t>(ch);
      const cu::NormAffine a = cu::normAffine(mean, var, gamma[k], beta[k], c.num("eps"));
      save_mean.push_back(mo.fmean);
      save_invstd.push_back(static_cast<float>(a.invstd));
      cu::updateRunning(&rm[k], &rv[k], mean, var, m, c.num("momentum"));
      for (int64_t img = 0; img < s.n; ++img)
        for (int64_t i = 0; i < s.hw; ++i)
          y[s.at(img, ch, i)] =
              cu::normalizeOne(x[s.at(img, ch, i)], a.scale, a.shift, false, 0, false);
    }
    expectAgrees(c, "out0", y, "y");
    expectAgrees(c, "out1", save_mean, "save_mean");
    expectAgrees(c, "out2", save_invstd, "save_invstd");
    expectAgrees(c, "after3", {rm.begin(), rm.end()}, "running_mean");
    expectAgrees(c, "after4", {rv.begin(), rv.end()}, "running_var");
  }
  {  // conv2d_stats' statistics (channelStatsKernel) from PyTorch's convolution output
    const NonfiniteCase c = mustLoad("conv2d_stats");
    const Nchw s(c.tensor("out0"));
    const std::vector<float> y = floats(c.tensor("out0"));
    std::vector<double> stats(static_cast<size_t>(3 * s.c));
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const Moments mo = moments(y, s, ch);
      const cu::StatsRow r = cu::statsRow(static_cast<double>(s.n * s.hw), mo.sum, mo.sq, mo.fmean);
      stats[static_cast<size_t>(ch)] = r.count;
      stats[static_cast<size_t>(s.c + ch)] = r.sum;
      stats[static_cast<size_t>(2 * s.c + ch)] = r.sumsq;
    }
    expectAgrees(c, "out1", stats, "stats");
  }
  for (const std::string tag : {"_relu_residual", "", "_relu"}) {  // statsCoefficientsKernel
    const NonfiniteCase c = mustLoad("batch_norm_apply" + tag);
    const Nchw s(c.tensor("in0"));
    const bool relu = c.flag("relu"), residual = c.has("in6");
    const std::vector<float> y = floats(c.tensor("in0")), gamma = floats(c.tensor("in2")),
                             beta = floats(c.tensor("in3"));
    const std::vector<double>& stats = c.tensor("in1").values;
    const std::vector<float> res = residual ? floats(c.tensor("in6")) : std::vector<float>{};
    std::vector<float> rm = floats(c.tensor("in4")), rv = floats(c.tensor("in5"));
    std::vector<double> out(y.size()), save_mean, save_invstd;
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const size_t k = static_cast<size_t>(ch);
      const cu::NormStats st = cu::readNormStats(stats.data(), s.c, ch);
      const cu::NormAffine a = cu::normAffine(st.mean, st.var, gamma[k], beta[k], c.num("eps"));
      save_mean.push_back(static_cast<float>(st.mean));
      save_invstd.push_back(static_cast<float>(a.invstd));
      cu::updateRunning(&rm[k], &rv[k], st.mean, st.var, st.count, c.num("momentum"));
      for (int64_t img = 0; img < s.n; ++img)
        for (int64_t i = 0; i < s.hw; ++i) {
          const size_t at = s.at(img, ch, i);
          out[at] =
              cu::normalizeOne(y[at], a.scale, a.shift, residual, residual ? res[at] : 0.0f, relu);
        }
    }
    expectAgrees(c, "out0", out, "out");
    expectAgrees(c, "out1", save_mean, "save_mean");
    expectAgrees(c, "out2", save_invstd, "save_invstd");
    expectAgrees(c, "after4", {rm.begin(), rm.end()}, "running_mean");
    expectAgrees(c, "after5", {rv.begin(), rv.end()}, "running_var");
  }
  for (const std::string tag : {"_relu_residual", ""}) {  // backwardSumsKernel, backwardApplyKernel
    const NonfiniteCase r = mustLoad("batch_norm_backward_reduce" + tag);
    const Nchw s(r.tensor("in1"));
    const bool relu = r.has("in4");
    const std::vector<float> dout = floats(r.tensor("in0")), y = floats(r.tensor("in1")),
                             mean = floats(r.tensor("in2")), invstd = floats(r.tensor("in3"));
    const std::vector<float> out = relu ? floats(r.tensor("in4")) : std::vector<float>{};
    std::vector<double> sums(static_cast<size_t>(2 * s.c)), dbeta, dgamma;
    for (int64_t ch = 0; ch < s.c; ++ch) {
      double a = 0, b = 0;
      for (int64_t img = 0; img < s.n; ++img)
        for (int64_t i = 0; i < s.hw; ++i) {
          const size_t at = s.at(img, ch, i);
          const float dz = cu::maskedGrad(dout[at], relu, relu ? out[at] : 0.0f);
          a += dz;
          b += static_cast<double>(dz * (y[at] - mean[static_cast<size_t>(ch)]));
        }
      sums[static_cast<size_t>(ch)] = a;
      sums[static_cast<size_t>(s.c + ch)] = b;
      dbeta.push_back(static_cast<float>(a));
      dgamma.push_back(
          static_cast<float>(b * static_cast<double>(invstd[static_cast<size_t>(ch)])));
    }
    expectAgrees(r, "out0", sums, "sums");
    expectAgrees(r, "out1", dbeta, "dbeta");
    expectAgrees(r, "out2", dgamma, "dgamma");

    const NonfiniteCase p = mustLoad("batch_norm_backward_apply" + tag);
    const std::vector<float> gamma = floats(p.tensor("in2"));
    const std::vector<double>& psums = p.tensor("in5").values;
    const std::vector<double>& stats = p.tensor("in6").values;
    std::vector<double> dy(dout.size()), dz_out(dout.size());
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const size_t k = static_cast<size_t>(ch);
      const cu::NormBackward kk = cu::normBackward(
          stats[k], psums[k], psums[static_cast<size_t>(s.c + ch)], gamma[k], invstd[k]);
      for (int64_t img = 0; img < s.n; ++img)
        for (int64_t i = 0; i < s.hw; ++i) {
          const size_t at = s.at(img, ch, i);
          const float dz = cu::maskedGrad(dout[at], relu, relu ? out[at] : 0.0f);
          dy[at] = cu::normBackwardOne(kk, dz, y[at], mean[k]);
          dz_out[at] = dz;
        }
    }
    expectAgrees(p, "out0", dy, "dy");
    if (p.has("out1")) expectAgrees(p, "out1", dz_out, "dresidual");
  }
}

// ---- SGD (optimizer_math.h, one element per thread) -----------------------------------

TEST(CudaMathNonFinite, SgdMatchesPyTorch) {
  for (const std::string name : {"sgd_update", "sgd_update_plain"}) {
    const NonfiniteCase c = mustLoad(name);
    const bool momentum = c.num("momentum") > 0;
    std::vector<float> w = floats(c.tensor("in0")), m;
    const std::vector<float> g = floats(c.tensor("in1"));
    if (momentum) m = floats(c.tensor("in2"));
    const float factor = c.has("in3") ? static_cast<float>(c.tensor("in3").values[0]) : 1.0f;
    const cu::SgdParams p = cu::sgdParamsAt({c.num("lr"), static_cast<float>(c.num("momentum")),
                                             static_cast<float>(c.num("weight_decay")),
                                             c.has("in3") ? &factor : nullptr});
    for (size_t i = 0; i < w.size(); ++i) {
      if (momentum)
        cu::sgdStep(w[i], g[i], m[i], p);
      else
        cu::sgdStep(w[i], g[i], p);
    }
    expectAgrees(c, "after0", {w.begin(), w.end()}, "w");
    if (momentum) expectAgrees(c, "after2", {m.begin(), m.end()}, "momentum");
  }
}

}  // namespace
}  // namespace tandem::testing
