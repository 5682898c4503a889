// The transformer kernels' CUDA side. Without a GPU: the per-element and per-row math the
// kernels run (dropout_math.h, row_math.h, backend/dropout_mask.h, adamw_math.h,
// cross_entropy_math.h, embedding_math.h), compiled here and driven in the kernels' order
// (a warp's 32 lanes and its butterflies replayed), against the CPU cores; and the
// row-major -> column-major plan of the cuBLASLt matmul run by a reference GEMM against
// the CPU's oneDNN matmul. With a GPU: the launch functions against the CPU cores.
//
// Tolerances: where both sides run the same operations in the same order (dropout,
// embedding, AdamW, the reductions' spreads) the bits must be equal. Elsewhere the orders
// of f32 additions differ (32 lanes and a butterfly against oneDNN's loops) and erf, exp,
// tanh come from different approximations (libm or libdevice against oneDNN's jit): errors
// relative to the tensor's scale of at most kF32 = 1e-5 (a few ulps of each term of rows
// of at most 64), and for bf16 results one rounding more, kBf16 = 2^-7 (a rounding on
// each side, each within 2^-9 of the value).

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/adamw_math.h"
#include "backend/cpu/adamw_core.h"
#include "backend/cpu/cross_entropy_core.h"
#include "backend/cpu/dropout_core.h"
#include "backend/cpu/embedding_core.h"
#include "backend/cpu/layer_norm_core.h"
#include "backend/cpu/matmul_core.h"
#include "backend/cpu/reduce_core.h"
#include "backend/cpu/softmax_core.h"
#include "backend/cross_entropy_math.h"
#include "backend/cuda/adamw_launch.h"
#include "backend/cuda/cross_entropy_launch.h"
#include "backend/cuda/dropout_launch.h"
#include "backend/cuda/dropout_math.h"
#include "backend/cuda/embedding_launch.h"
#include "backend/cuda/matmul_lt.h"
#include "backend/cuda/matmul_plan.h"
#include "backend/cuda/row_math.h"
#include "backend/cuda/rows_launch.h"
#include "backend/embedding_math.h"
#include "gtest/gtest.h"
#include "tests/cores/core_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using backend::AxisSplit;
using backend::MatmulShape;
namespace cpu = backend::cpu;
constexpr ir::DType kF32 = ir::DType::kF32, kBF16 = ir::DType::kBF16;
constexpr double kF32Tol = 1e-5, kBf16Tol = 1.0 / 128;
constexpr int kLanes = 32;

/// A Typed tensor's storage as the CUDA math reads it (uint16_t bits for bf16).
template <typename T>
T* raw(Typed& t) {
  return static_cast<T*>(t.data());
}
template <typename T>
const T* raw(const Typed& t) {
  return static_cast<const T*>(t.data());
}

/// max |a - b| / max |b| over two tensors.
double scaledError(const Typed& got, const Typed& want) {
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    const double g = got.at(i), w = want.at(i);
    worst = std::max(worst, std::isnan(g) != std::isnan(w) ? INFINITY : std::abs(g - w));
    scale = std::max(scale, std::abs(w));
  }
  return scale > 0 ? worst / scale : worst;
}

bool sameBits(const Typed& a, const Typed& b) {
  const size_t bytes = static_cast<size_t>(a.size()) * (a.type() == kBF16 ? 2 : 4);
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), bytes) == 0;
}

/// A warp's butterfly as warp_reduce.cuh runs it: lane l combines its value with lane
/// l ^ o's for o = 16, 8, 4, 2, 1; every lane ends with lane 0's result.
template <typename T, typename Op>
T butterfly(std::array<T, kLanes> v, Op op) {
  for (int o = kLanes / 2; o > 0; o /= 2) {
    std::array<T, kLanes> next;
    for (int l = 0; l < kLanes; ++l) next[size_t(l)] = op(v[size_t(l)], v[size_t(l ^ o)]);
    v = next;
  }
  return v[0];
}
template <typename T>
T warpSum(const std::array<T, kLanes>& v) {
  return butterfly(v, [](T a, T b) { return a + b; });
}
template <typename T>
T warpMax(const std::array<T, kLanes>& v) {
  return butterfly(v, [](T a, T b) { return b > a ? b : a; });
}
/// f(lane) for the warp's 32 lanes.
template <typename F>
auto lanes(F f) {
  std::array<decltype(f(0)), kLanes> v;
  for (int l = 0; l < kLanes; ++l) v[size_t(l)] = f(l);
  return v;
}

// ---- Dropout ------------------------------------------------------------------------

TEST(CudaTransformerMath, DropoutGroupsAreTheCpuLoopBitForBit) {
  // A device's slice (samples 3..9 of the global batch) of 7 x 43 values per sample.
  const backend::DropoutMask mask = backend::dropoutMask(99, 12, 5, 0.3);
  const int64_t first = 3, samples = 7, per = 7 * 43, groups = (per + 7) / 8;
  for (ir::DType type : {kF32, kBF16}) {
    const Typed x(type, randomValues(samples * per, 3));
    Typed cpu_y(type, samples * per), gpu_y(type, samples * per);
    if (type == kBF16) {
      cpu::dropoutApply(mask, {first, samples, per}, raw<backend::bf16>(x), raw<backend::bf16>(cpu_y));
      for (int64_t r = 0; r < samples; ++r)
        for (int64_t g = 0; g < groups; ++g)
          cu::dropoutGroup(mask, first, per, r, g, raw<uint16_t>(x), raw<uint16_t>(gpu_y));
    } else {
      cpu::dropoutApply(mask, {first, samples, per}, raw<float>(x), raw<float>(cpu_y));
      for (int64_t r = 0; r < samples; ++r)
        for (int64_t g = 0; g < groups; ++g)
          cu::dropoutGroup(mask, first, per, r, g, raw<float>(x), raw<float>(gpu_y));
    }
    EXPECT_TRUE(sameBits(gpu_y, cpu_y)) << (type == kBF16 ? "bf16" : "f32");
  }
}

// ---- Layer norm ---------------------------------------------------------------------

/// The CUDA kernels' layer norm on the host: one warp per row, lanes and butterflies.
struct LayerNormRun {
  Typed y, dx;
  std::vector<float> mean, var, dgamma, dbeta;
};

template <typename T>
LayerNormRun cudaLayerNorm(ir::DType type, const Typed& x, const Typed& dy,
                           const std::vector<float>& gamma, const std::vector<float>& beta,
                           int64_t rows, int64_t width, float eps) {
  LayerNormRun r{Typed(type, rows * width),         Typed(type, rows * width),
                 std::vector<float>(size_t(rows)),  std::vector<float>(size_t(rows)),
                 std::vector<float>(size_t(width)), std::vector<float>(size_t(width))};
  const float n = float(width);
  for (int64_t row = 0; row < rows; ++row) {
    const T* xr = raw<T>(x) + row * width;
    const T* dyr = raw<T>(dy) + row * width;
    const float m = warpSum(lanes([&](int l) { return cu::laneRowSum(xr, width, l, kLanes); })) / n;
    const float v = warpSum(lanes([&](int l) {
                      return cu::laneRowSquaredDeviation(xr, width, m, l, kLanes);
                    })) /
                    n;
    const float rstd = cu::layerNormRstd(v, eps);
    for (int64_t j = 0; j < width; ++j)
      cu::store(raw<T>(r.y), row * width + j,
                cu::layerNormOut(cu::load(xr, j), m, rstd, gamma[size_t(j)], beta[size_t(j)]));
    r.mean[size_t(row)] = m;
    r.var[size_t(row)] = v;
    auto sums = lanes([&](int l) {
      return cu::laneLayerNormGradSums(xr, dyr, gamma.data(), width, m, rstd, l, kLanes);
    });
    const float mean_g = warpSum(lanes([&](int l) { return sums[size_t(l)].g; })) / n;
    const float mean_gx = warpSum(lanes([&](int l) { return sums[size_t(l)].gx; })) / n;
    for (int64_t j = 0; j < width; ++j)
      cu::store(raw<T>(r.dx), row * width + j,
                cu::layerNormGradIn(cu::load(xr, j), cu::load(dyr, j), gamma[size_t(j)], m, rstd,
                                    mean_g, mean_gx));
  }
  for (int64_t c = 0; c < width; ++c) {
    const cu::LayerNormParamGrads g = cu::layerNormParamGrads(raw<T>(x), raw<T>(dy), r.mean.data(),
                                                              r.var.data(), eps, rows, width, c);
    r.dgamma[size_t(c)] = g.dgamma;
    r.dbeta[size_t(c)] = g.dbeta;
  }
  return r;
}

double vectorError(const std::vector<float>& got, const std::vector<float>& want) {
  Typed g(kF32, std::vector<double>(got.begin(), got.end()));
  Typed w(kF32, std::vector<double>(want.begin(), want.end()));
  return scaledError(g, w);
}

TEST(CudaTransformerMath, LayerNormRowsMatchTheCpuCore) {
  for (ir::DType type : {kF32, kBF16}) {
    for (int64_t width : {13, 64, 100}) {
      SCOPED_TRACE((type == kBF16 ? "bf16 width " : "f32 width ") + std::to_string(width));
      const int64_t rows = 37;
      const float eps = 1e-6f;
      std::vector<double> xv = randomValues(rows * width, 4, 3.0);
      for (double& v : xv) v += 2.0;  // an offset: mean and deviations both matter
      const Typed x(type, xv), dy(type, randomValues(rows * width, 5));
      const Typed gamma_t(kF32, randomValues(width, 6)), beta_t(kF32, randomValues(width, 7));
      const std::vector<float> gamma = gamma_t.values(), beta = beta_t.values();
      const cpu::LayerNormSpec spec{rows, width, type, eps};
      auto fwd = cpu::LayerNormForward::make(coreContext(), spec, "t");
      auto bwd = cpu::LayerNormBackward::make(coreContext(), spec, "t");
      ASSERT_TRUE(fwd.ok() && bwd.ok());
      Typed y(type, rows * width), dx(type, rows * width);
      std::vector<float> mean(static_cast<size_t>(rows)), var(static_cast<size_t>(rows)),
          dgamma(static_cast<size_t>(width)), dbeta(static_cast<size_t>(width));
      fwd->run(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), var.data());
      bwd->run(x.data(), dy.data(), mean.data(), var.data(), gamma.data(), dx.data(), dgamma.data(),
               dbeta.data());
      const LayerNormRun g =
          type == kBF16 ? cudaLayerNorm<uint16_t>(type, x, dy, gamma, beta, rows, width, eps)
                        : cudaLayerNorm<float>(type, x, dy, gamma, beta, rows, width, eps);
      const double tol = type == kBF16 ? kBf16Tol : kF32Tol;
      EXPECT_LE(scaledError(g.y, y), tol) << "y";
      EXPECT_LE(scaledError(g.dx, dx), tol) << "dx";
      EXPECT_LE(vectorError(g.mean, mean), kF32Tol) << "mean";
      EXPECT_LE(vectorError(g.var, var), kF32Tol) << "var";
      EXPECT_LE(vectorError(g.dgamma, dgamma), kF32Tol) << "dgamma";
      EXPECT_LE(vectorError(g.dbeta, dbeta), kF32Tol) << "dbeta";
    }
  }
}

// ---- Softmax and reductions ---------------------------------------------------------

template <typename T>
void cudaSoftmax(const Typed& x, const Typed& dy, Typed& y, Typed& dx, const AxisSplit& d,
                 bool log) {
  for (int64_t q = 0; q < d.outer * d.inner; ++q) {
    const int64_t base = q / d.inner * d.axis * d.inner + q % d.inner;
    const T* row = raw<T>(x) + base;
    const float max =
        warpMax(lanes([&](int l) { return cu::laneRowMax(row, d.axis, d.inner, l, kLanes); }));
    const float sum = warpSum(
        lanes([&](int l) { return cu::laneRowExpSum(row, d.axis, d.inner, max, l, kLanes); }));
    for (int64_t j = 0; j < d.axis; ++j)
      cu::store(raw<T>(y), base + j * d.inner,
                cu::softmaxOut(cu::load(row, j * d.inner), max, sum, log));
  }
  for (int64_t q = 0; q < d.outer * d.inner; ++q) {
    const int64_t base = q / d.inner * d.axis * d.inner + q % d.inner;
    const float sum = warpSum(lanes([&](int l) {
      return cu::laneSoftmaxGradSum(raw<T>(y) + base, raw<T>(dy) + base, d.axis, d.inner, log, l,
                                    kLanes);
    }));
    for (int64_t j = 0; j < d.axis; ++j) {
      const int64_t at = base + j * d.inner;
      cu::store(raw<T>(dx), at,
                cu::softmaxGradIn(cu::load(raw<T>(y), at), cu::load(raw<T>(dy), at), sum, log));
    }
  }
}

TEST(CudaTransformerMath, SoftmaxRowsMatchTheCpuCore) {
  for (ir::DType type : {kF32, kBF16})
    for (bool log : {false, true})
      for (const AxisSplit& d : {AxisSplit{37, 50, 1}, AxisSplit{3, 70, 5}, AxisSplit{1, 9, 11}}) {
        SCOPED_TRACE(std::string(log ? "log-softmax " : "softmax ") +
                     (type == kBF16 ? "bf16 " : "f32 ") + std::to_string(d.axis));
        const Typed x(type, randomValues(d.numElements(), 8, 3.0)),
            dy(type, randomValues(d.numElements(), 9));
        auto fwd = cpu::SoftmaxForward::make(coreContext(), {d, type, log}, "t");
        auto bwd = cpu::SoftmaxBackward::make(coreContext(), {d, type, log}, "t");
        ASSERT_TRUE(fwd.ok() && bwd.ok());
        Typed y(type, d.numElements()), dx(type, d.numElements()), gy(type, d.numElements()),
            gdx(type, d.numElements());
        fwd->run(x.data(), y.data());
        bwd->run(y.data(), dy.data(), dx.data());
        if (type == kBF16)
          cudaSoftmax<uint16_t>(x, dy, gy, gdx, d, log);
        else
          cudaSoftmax<float>(x, dy, gy, gdx, d, log);
        const double tol = type == kBF16 ? kBf16Tol : kF32Tol;
        EXPECT_LE(scaledError(gy, y), tol) << "y";
        EXPECT_LE(scaledError(gdx, dx), type == kBF16 ? 2 * tol : tol) << "dx";
      }
}

TEST(CudaTransformerMath, AxisSumsMatchTheCpuCoreAndSpreadsAreItsBits) {
  for (ir::DType type : {kF32, kBF16})
    for (bool mean : {false, true})
      for (const AxisSplit& d : {AxisSplit{4, 50, 64}, AxisSplit{6, 9, 1}, AxisSplit{1, 13, 7}}) {
        SCOPED_TRACE(std::string(mean ? "mean " : "sum ") + (type == kBF16 ? "bf16" : "f32"));
        const cpu::ReduceSpec spec{d, type, mean ? cpu::Reduction::kMean : cpu::Reduction::kSum};
        auto fwd = cpu::ReduceForward::make(coreContext(), spec, "t");
        ASSERT_TRUE(fwd.ok());
        const Typed x(type, randomValues(d.numElements(), 10)),
            dy(type, randomValues(d.outer * d.inner, 11));
        Typed y(type, d.outer * d.inner), gy(type, d.outer * d.inner), dx(type, d.numElements()),
            gdx(type, d.numElements());
        fwd->run(x.data(), y.data());
        cpu::reduceBackward(spec, dy.data(), dx.data());
        const float scale = mean ? 1.0f / float(d.axis) : 1.0f;
        for (int64_t t = 0; t < d.outer * d.inner; ++t) {
          if (type == kBF16)
            cu::store(
                raw<uint16_t>(gy), t,
                cu::axisSum(raw<uint16_t>(x), t / d.inner, t % d.inner, d.axis, d.inner, scale));
          else
            cu::store(raw<float>(gy), t,
                      cu::axisSum(raw<float>(x), t / d.inner, t % d.inner, d.axis, d.inner, scale));
        }
        for (int64_t t = 0; t < d.numElements(); ++t) {
          if (type == kBF16)
            cu::store(raw<uint16_t>(gdx), t,
                      cu::axisSpread(raw<uint16_t>(dy), t, d.axis, d.inner, scale));
          else
            cu::store(raw<float>(gdx), t,
                      cu::axisSpread(raw<float>(dy), t, d.axis, d.inner, scale));
        }
        EXPECT_LE(scaledError(gy, y), type == kBF16 ? kBf16Tol : kF32Tol) << "y";
        EXPECT_TRUE(sameBits(gdx, dx)) << "dx";
      }
}

// ---- Embedding, AdamW, cross-entropy -------------------------------------------------

TEST(CudaTransformerMath, EmbeddingGradientColumnsAreTheCpuBitForBit) {
  const cpu::EmbeddingShape s{9, 24, 40};
  std::vector<int32_t> index(size_t(s.tokens));
  std::mt19937 rng(12);
  for (int32_t& i : index) i = int32_t(rng() % 9);
  index[5] = index[6] = index[7] = 2;  // many additions into one row
  const Typed dy(kF32, randomValues(s.tokens * s.width, 13));
  std::vector<float> cpu_grad(size_t(s.vocab * s.width)), gpu_grad(cpu_grad.size(), 0.0f);
  cpu::embeddingBackward(s, raw<float>(dy), index.data(), cpu_grad.data());
  for (int64_t c = 0; c < s.width; ++c)
    backend::embeddingGradColumn(raw<float>(dy), index.data(), s.tokens, s.vocab, s.width, c,
                                 gpu_grad.data(),
                                 [](const float* p, int64_t i) { return cu::load(p, i); });
  EXPECT_EQ(gpu_grad, cpu_grad);
  EXPECT_EQ(backend::embeddingRow(9, 9), -1);
  EXPECT_EQ(backend::embeddingRow(-1, 9), -1);
}

TEST(CudaTransformerMath, AdamWStepIsTheVectorizedCpuLoopBitForBit) {
  // The CPU loop is vectorized (16 lanes, IEEE sqrt and division); the kernel runs the
  // same scalar function per element: the same bits.
  const int64_t n = 1000;
  const Typed g(kF32, randomValues(n, 14, 1e-3));
  std::vector<float> w = Typed(kF32, randomValues(n, 15)).values(), m(size_t(n), 0.0f),
                     v(size_t(n), 0.0f);
  std::vector<float> w2 = w, m2 = m, v2 = v;
  backend::AdamWHyper h;
  h.weight_decay = 0.05;
  for (int64_t t = 1; t <= 3; ++t) {
    const backend::AdamWScalars s = backend::adamwScalars(h, t);
    cpu::adamwUpdate(w.data(), raw<float>(g), m.data(), v.data(), n, s);
    for (int64_t i = 0; i < n; ++i)
      backend::adamwStep(w2[size_t(i)], cu::load(raw<float>(g), i), m2[size_t(i)], v2[size_t(i)],
                         s);
  }
  EXPECT_EQ(w2, w);
  EXPECT_EQ(m2, m);
  EXPECT_EQ(v2, v);
}

TEST(CudaTransformerMath, SmoothedCrossEntropyWarpsMatchTheCpu) {
  const int64_t rows = 45, classes = 10;
  const double smoothing = 0.1, divisor = 64.0;
  const Typed logits_t(kF32, randomValues(rows * classes, 16, 3.0));
  const std::vector<float> logits = logits_t.values();
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) labels[size_t(r)] = r % 7 == 3 ? -1 : int32_t(r % classes);
  const cpu::CrossEntropySpec spec{rows, classes, smoothing, divisor};
  const float cpu_loss = cpu::crossEntropyForward(spec, logits.data(), labels.data());
  std::vector<float> cpu_grad(logits.size()), gpu_grad(logits.size());
  cpu::crossEntropyBackward(spec, logits.data(), labels.data(), 1.0f, cpu_grad.data());
  // The kernels: a warp per row (lanes over the classes); the loss block's 32 warps each
  // take rows w, w + 32, ... and their partials add in warp order.
  std::array<double, 32> partial{};
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * classes;
    const double max =
        warpMax(lanes([&](int l) { return backend::ceLaneMax(row, classes, l, kLanes); }));
    const auto sums =
        lanes([&](int l) { return backend::ceLaneSums(row, classes, max, l, kLanes); });
    const double lse =
        backend::ceLogSumExp(max, warpSum(lanes([&](int l) { return sums[size_t(l)].exp_sum; })));
    const double sum = warpSum(lanes([&](int l) { return sums[size_t(l)].sum; }));
    const int32_t label = labels[size_t(r)];
    for (int64_t j = 0; j < classes; ++j)
      gpu_grad[size_t(r * classes + j)] =
          label < 0 ? 0.0f
                    : backend::ceGrad(row[j], j == label, lse, smoothing, classes, 1.0 / divisor);
    if (label >= 0)
      partial[size_t(r % 32)] += backend::ceRowLoss(row, classes, label, lse, sum, smoothing);
  }
  double total = 0;
  for (double p : partial) total += p;
  // Double sums in two orders, rounded to float once: equal or an ulp apart.
  EXPECT_NEAR(float(total / divisor), cpu_loss, 2e-7 * std::abs(cpu_loss));
  EXPECT_LE(vectorError(gpu_grad, cpu_grad), 1e-6);
}

// ---- Matmul: the cuBLASLt plan ------------------------------------------------------

/// D = op(A) op(B) per batch entry as cuBLAS defines it on column-major storage with
/// strided batches, in double.
std::vector<double> referenceLt(const cu::MatmulLtPlan& p, const float* a, const float* b) {
  std::vector<double> d(size_t(p.batch * p.stride_d));
  for (int64_t bt = 0; bt < p.batch; ++bt)
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        double s = 0;
        const float* ab = a + bt * p.stride_a;
        const float* bb = b + bt * p.stride_b;
        for (int64_t q = 0; q < p.k; ++q) {
          const double av = p.trans_a ? ab[q + i * p.lda] : ab[i + q * p.lda];
          const double bv = p.trans_b ? bb[j + q * p.ldb] : bb[q + j * p.ldb];
          s += av * bv;
        }
        d[size_t(bt * p.stride_d + i + j * p.ldd)] = s;
      }
  return d;
}

TEST(CudaTransformerMath, MatmulLtPlanIsTheCpuMatmulForEveryFlag) {
  for (int flags = 0; flags < 16; ++flags) {
    const MatmulShape s{
        3, 5, 7, 4, bool(flags & 1), bool(flags & 2), bool(flags & 4), bool(flags & 8)};
    if (s.a_broadcast && s.b_broadcast) continue;
    SCOPED_TRACE(backend::describe(s));
    const Typed a(kF32, randomValues(s.aBatch() * s.aRows() * s.aCols(), 20 + flags));
    const Typed b(kF32, randomValues(s.bBatch() * s.bRows() * s.bCols(), 40 + flags));
    cpu::MatmulSpec spec;
    spec.shape = s;
    auto core = cpu::MatmulCore::make(coreContext(), spec, "t");
    ASSERT_TRUE(core.ok()) << core.status();
    Typed c(kF32, s.batch * s.m * s.n);
    core->run(a.data(), b.data(), nullptr, c.data());
    const cu::MatmulLtPlan p = cu::matmulLtPlan(s);
    EXPECT_EQ(p.stride_d, s.m * s.n);
    EXPECT_EQ(p.ldd, p.m);  // D dense: the row-major C as it is
    // cuBLASLt's A is our B and its B our A.
    const std::vector<double> d = referenceLt(p, raw<float>(b), raw<float>(a));
    Typed want(kF32, d);
    EXPECT_LE(scaledError(c, want), kF32Tol);
  }
}

// ---- On a GPU -----------------------------------------------------------------------

/// Device memory holding a copy of a host tensor, or `bytes` of NaN bytes.
class DeviceCopy {
 public:
  explicit DeviceCopy(const void* host, size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(bytes, 1)), cudaSuccess);
    if (host != nullptr)
      EXPECT_EQ(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    else
      EXPECT_EQ(cudaMemset(p_, 0xFF, bytes), cudaSuccess);
  }
  explicit DeviceCopy(const Typed& t) : DeviceCopy(t.data(), bytesOf(t)) {}
  ~DeviceCopy() { cudaFree(p_); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  void copyTo(void* host) const {
    EXPECT_EQ(cudaMemcpy(host, p_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  static size_t bytesOf(const Typed& t) { return size_t(t.size()) * (t.type() == kBF16 ? 2 : 4); }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

/// Waits for the kernels and expects no error from them.
void expectKernelsRan() {
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CudaTransformerKernels, DropoutIsTheCpuCoreBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  const backend::DropoutMask mask = backend::dropoutMask(7, 3, 1, 0.1);
  const int64_t samples = 128, per = 50 * 128;
  const Typed x(kF32, randomValues(samples * per, 32));
  Typed y(kF32, samples * per), gy(kF32, samples * per);
  cpu::dropoutApply(mask, {64, samples, per}, raw<float>(x), raw<float>(y));
  const int32_t step = static_cast<int32_t>(mask.step);  // the kernel reads it on the GPU
  DeviceCopy dx(x), dy(nullptr, DeviceCopy::bytesOf(y)), dstep(&step, sizeof step);
  cu::launchDropout(mask, dstep.as<int32_t>(), 64, samples, per, dx.as<float>(), dy.as<float>(),
                    nullptr);
  expectKernelsRan();
  dy.copyTo(gy.data());
  EXPECT_TRUE(sameBits(gy, y)) << "dropout";
}

TEST(CudaTransformerKernels, LayerNormSoftmaxAndSumsMatchTheCpuCores) {
  TANDEM_SKIP_WITHOUT_GPU();
  const int64_t rows = 6400, width = 64;
  const Typed x(kF32, randomValues(rows * width, 33, 2.0)),
      dy(kF32, randomValues(rows * width, 34));
  const Typed gamma(kF32, randomValues(width, 35)), beta(kF32, randomValues(width, 36));
  const cpu::LayerNormSpec spec{rows, width, kF32, 1e-6f};
  auto fwd = cpu::LayerNormForward::make(coreContext(), spec, "t");
  auto bwd = cpu::LayerNormBackward::make(coreContext(), spec, "t");
  ASSERT_TRUE(fwd.ok() && bwd.ok());
  Typed y(kF32, rows * width), dx(kF32, rows * width), mean(kF32, rows), var(kF32, rows),
      dgamma(kF32, width), dbeta(kF32, width);
  fwd->run(x.data(), raw<float>(gamma), raw<float>(beta), y.data(), raw<float>(mean),
           raw<float>(var));
  bwd->run(x.data(), dy.data(), raw<float>(mean), raw<float>(var), raw<float>(gamma), dx.data(),
           raw<float>(dgamma), raw<float>(dbeta));
  DeviceCopy gx(x), gdy(dy), gg(gamma), gb(beta), gy(nullptr, DeviceCopy::bytesOf(y)),
      gdx(nullptr, DeviceCopy::bytesOf(dx)), gm(nullptr, DeviceCopy::bytesOf(mean)),
      gv(nullptr, DeviceCopy::bytesOf(var)), gdg(nullptr, DeviceCopy::bytesOf(dgamma)),
      gdb(nullptr, DeviceCopy::bytesOf(dbeta));
  cu::launchLayerNorm(gx.as<float>(), gg.as<float>(), gb.as<float>(), gy.as<float>(),
                      gm.as<float>(), gv.as<float>(), rows, width, 1e-6f, nullptr);
  cu::launchLayerNormBackward(gx.as<float>(), gdy.as<float>(), gm.as<float>(), gv.as<float>(),
                              gg.as<float>(), gdx.as<float>(), gdg.as<float>(), gdb.as<float>(),
                              rows, width, 1e-6f, nullptr);
  expectKernelsRan();
  Typed hy(kF32, rows * width), hdx(kF32, rows * width), hdg(kF32, width), hdb(kF32, width);
  gy.copyTo(hy.data());
  gdx.copyTo(hdx.data());
  gdg.copyTo(hdg.data());
  gdb.copyTo(hdb.data());
  EXPECT_LE(scaledError(hy, y), kF32Tol);
  EXPECT_LE(scaledError(hdx, dx), kF32Tol);
  // 6400 rows added in order on the GPU, in oneDNN's blocks on the CPU.
  EXPECT_LE(scaledError(hdg, dgamma), 1e-4);
  EXPECT_LE(scaledError(hdb, dbeta), 1e-4);

  const AxisSplit d{512 * 50, 50, 1};
  const Typed s(kF32, randomValues(d.numElements(), 37, 3.0));
  Typed p(kF32, d.numElements()), hp(kF32, d.numElements());
  auto sm = cpu::SoftmaxForward::make(coreContext(), {d, kF32, false}, "t");
  ASSERT_TRUE(sm.ok());
  sm->run(s.data(), p.data());
  DeviceCopy gs(s), gp(nullptr, DeviceCopy::bytesOf(p));
  cu::launchSoftmax(gs.as<float>(), gp.as<float>(), d, false, nullptr);
  expectKernelsRan();
  gp.copyTo(hp.data());
  EXPECT_LE(scaledError(hp, p), kF32Tol);
}

TEST(CudaTransformerKernels, AdamWAndEmbeddingBackwardAreTheCpuBits) {
  TANDEM_SKIP_WITHOUT_GPU();
  const int64_t n = 208000;
  const Typed g(kF32, randomValues(n, 38, 1e-2));
  std::vector<float> w = Typed(kF32, randomValues(n, 39)).values(), m(size_t(n), 0.0f),
                     v(size_t(n), 0.0f);
  DeviceCopy gw(w.data(), size_t(n) * 4), gm(m.data(), size_t(n) * 4), gv(v.data(), size_t(n) * 4),
      gg(g);
  const backend::AdamWScalars sc = backend::adamwScalars({}, 1);
  cpu::adamwUpdate(w.data(), raw<float>(g), m.data(), v.data(), n, sc);
  cu::launchAdamWUpdate(gw.as<float>(), gg.as<float>(), gm.as<float>(), gv.as<float>(), n, sc,
                        nullptr);
  expectKernelsRan();
  std::vector<float> hw(static_cast<size_t>(n));
  gw.copyTo(hw.data());
  EXPECT_EQ(hw, w) << "AdamW: the same bits";

  const cpu::EmbeddingShape es{50, 64, 128 * 50};
  std::vector<int32_t> index(size_t(es.tokens));
  for (size_t i = 0; i < index.size(); ++i) index[i] = int32_t(i % 50);
  const Typed dy(kF32, randomValues(es.tokens * es.width, 40));
  std::vector<float> dtable(size_t(es.vocab * es.width)), hd(dtable.size());
  cpu::embeddingBackward(es, raw<float>(dy), index.data(), dtable.data());
  DeviceCopy gi(index.data(), index.size() * 4), gdy(dy), gdt(nullptr, dtable.size() * 4);
  cu::launchEmbeddingBackward(gdy.as<float>(), gi.as<int32_t>(), gdt.as<float>(), es.vocab,
                              es.width, es.tokens, nullptr);
  expectKernelsRan();
  gdt.copyTo(hd.data());
  EXPECT_EQ(hd, dtable) << "embedding backward: the same bits";
}

TEST(CudaTransformerKernels, MatmulLtMatchesTheCpuCore) {
  TANDEM_SKIP_WITHOUT_GPU();
  cu::BlasHandles handles;
  ASSERT_EQ(cublasLtCreate(&handles.lt), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasCreate(&handles.blas), CUBLAS_STATUS_SUCCESS);
  // The attention products (scale on the scores), the MLP's with its bias, a broadcast B.
  struct Case {
    MatmulShape s;
    bool bias;
    float scale;
  };
  for (const auto& [s, with_bias, scale] :
       {Case{{512, 50, 50, 16, false, true}, false, 0.25f}, Case{{512, 50, 16, 50}, false, 1.0f},
        Case{{1, 6400, 192, 64, false, true}, true, 1.0f},
        Case{{4, 7, 5, 3, true, false, false, true}, true, 1.0f}}) {
    SCOPED_TRACE(backend::describe(s));
    const Typed a(kF32, randomValues(s.aBatch() * s.aRows() * s.aCols(), 41));
    const Typed b(kF32, randomValues(s.bBatch() * s.bRows() * s.bCols(), 42));
    const Typed bias(kF32, randomValues(s.n, 43));
    cpu::MatmulSpec spec;
    spec.shape = s;
    if (with_bias) spec.bias = kF32;
    spec.scale = scale;
    auto core = cpu::MatmulCore::make(coreContext(), spec, "t");
    ASSERT_TRUE(core.ok());
    Typed c(kF32, s.batch * s.m * s.n), hc(kF32, s.batch * s.m * s.n);
    core->run(a.data(), b.data(), with_bias ? bias.data() : nullptr, c.data());
    auto lt =
        cu::MatmulLt::make(handles, {s, kF32, kF32, with_bias, scale, /*allow_tf32=*/false}, "t");
    ASSERT_TRUE(lt.ok()) << lt.status();
    SCOPED_TRACE(cu::describeGemm((*lt)->choice()));
    DeviceCopy ga(a), gb(b), gbias(bias), gc(nullptr, DeviceCopy::bytesOf(c)),
        ws(nullptr, size_t((*lt)->workspaceBytes()));
    absl::Status st =
        (*lt)->run(handles, ga.as<void>(), gb.as<void>(), with_bias ? gbias.as<void>() : nullptr,
                   gc.as<void>(), ws.as<void>(), nullptr);
    EXPECT_TRUE(st.ok()) << st;
    expectKernelsRan();
    gc.copyTo(hc.data());
    EXPECT_LE(scaledError(hc, c), kF32Tol);
  }
  cublasDestroy(handles.blas);
  cublasLtDestroy(handles.lt);
}

}  // namespace
}  // namespace tandem::testing
