// The transformer compute cores without PyTorch: gradients against central finite
// differences, matrix products over every combination of transpose and broadcast flags
// against a reference in double, repeatability, and the errors a wiring layer can get.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/axis_split.h"
#include "backend/cpu/cross_entropy_core.h"
#include "backend/cpu/embedding_core.h"
#include "backend/cpu/layer_norm_core.h"
#include "backend/cpu/matmul_core.h"
#include "backend/cpu/reduce_core.h"
#include "backend/cpu/softmax_core.h"
#include "backend/matmul_shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/kernel_test_util.h"
#include "tests/cores/core_test_util.h"

namespace tandem::testing {
namespace {

using backend::MatmulShape;
using backend::MatmulTensor;
using namespace backend::cpu;  // NOLINT: the cores under test
using ::testing::HasSubstr;
constexpr ir::DType kF32 = ir::DType::kF32;

std::vector<float> randomVector(int64_t n, uint32_t seed, float scale = 1.0f) {
  const std::vector<double> v = randomValues(n, seed, scale);
  return std::vector<float>(v.begin(), v.end());
}

// ---- Finite differences ---------------------------------------------------------------
//
// For a core y = f(x) and a random projection r, L(x) = sum r_i y_i(x) has gradient
// dL/dx = backward(dy = r). The central difference (L(x + h e_j) - L(x - h e_j)) / 2h,
// with L summed in double over the f32 outputs, has a truncation error of order h^2 f'''
// (about 1e-4 at h = 1e-2 for these smooth functions of O(1) inputs) and a rounding error
// of about 2^-24 |L| / h (1e-5 |L|): a tolerance of 1e-2 of the gradient's scale sits far
// above both and far below any wrong formula (a missing term is O(1) of the scale).

constexpr double kStep = 1e-2, kFdTol = 1e-2;

/// Checks `grad` (the analytic dL/dx) against central differences of `loss` at every
/// element of x (the inputs here are small).
void expectGradient(std::vector<float>& x, const std::vector<float>& grad,
                    const std::function<double()>& loss, const std::string& what) {
  double scale = 0, worst = 0;
  for (float g : grad) scale = std::max(scale, double(std::abs(g)));
  for (size_t j = 0; j < x.size(); ++j) {
    const float keep = x[j];
    x[j] = keep + float(kStep);
    const double up = loss();
    x[j] = keep - float(kStep);
    const double down = loss();
    x[j] = keep;
    const double fd = (up - down) / (double(keep + float(kStep)) - double(keep - float(kStep)));
    worst = std::max(worst, std::abs(fd - grad[j]));
  }
  EXPECT_LE(worst, kFdTol * scale)
      << what << ": finite differences disagree (scale " << scale << ")";
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

TEST(TransformerCoresFd, LayerNormGradientsOfXGammaAndBeta) {
  const LayerNormSpec spec{5, 7, kF32, 1e-5f};
  auto fwd = LayerNormForward::make(coreContext(), spec, "fd");
  auto bwd = LayerNormBackward::make(coreContext(), spec, "fd");
  ASSERT_TRUE(fwd.ok() && bwd.ok());
  std::vector<float> x = randomVector(35, 1, 2.0f), gamma = randomVector(7, 2),
                     beta = randomVector(7, 3), r = randomVector(35, 4);
  std::vector<float> y(35), mean(5), var(5), dx(35), dgamma(7), dbeta(7);
  auto loss = [&] {
    fwd->run(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), var.data());
    return dot(y, r);
  };
  loss();
  bwd->run(x.data(), r.data(), mean.data(), var.data(), gamma.data(), dx.data(), dgamma.data(),
           dbeta.data());
  expectGradient(x, dx, loss, "layer norm dx");
  expectGradient(gamma, dgamma, loss, "layer norm dgamma");
  expectGradient(beta, dbeta, loss, "layer norm dbeta");
}

TEST(TransformerCoresFd, SoftmaxAndLogSoftmaxOverAMiddleAxis) {
  for (bool log : {false, true}) {
    const SoftmaxSpec spec{{3, 6, 4}, kF32, log};
    auto fwd = SoftmaxForward::make(coreContext(), spec, "fd");
    auto bwd = SoftmaxBackward::make(coreContext(), spec, "fd");
    ASSERT_TRUE(fwd.ok() && bwd.ok());
    std::vector<float> x = randomVector(72, 5, 2.0f), r = randomVector(72, 6), y(72), dx(72);
    auto loss = [&] {
      fwd->run(x.data(), y.data());
      return dot(y, r);
    };
    loss();
    bwd->run(y.data(), r.data(), dx.data());
    expectGradient(x, dx, loss, log ? "log-softmax" : "softmax");
  }
}

TEST(TransformerCoresFd, MeanOverAnAxis) {
  const ReduceSpec spec{{2, 5, 3}, kF32, Reduction::kMean};
  auto fwd = ReduceForward::make(coreContext(), spec, "fd");
  ASSERT_TRUE(fwd.ok());
  std::vector<float> x = randomVector(30, 9), r = randomVector(6, 10), y(6), dx(30);
  auto loss = [&] {
    fwd->run(x.data(), y.data());
    return dot(y, r);
  };
  reduceBackward(spec, r.data(), dx.data());
  expectGradient(x, dx, loss, "mean");
}

TEST(TransformerCoresFd, SmoothedCrossEntropy) {
  const CrossEntropySpec s{6, 5, 0.2, 4.0};
  std::vector<float> logits = randomVector(30, 11, 2.0f), dlogits(30);
  const std::vector<int32_t> labels = {0, 4, -1, 2, 2, 1};
  crossEntropyBackward(s, logits.data(), labels.data(), 1.0f, dlogits.data());
  expectGradient(
      logits, dlogits, [&] { return crossEntropyForward(s, logits.data(), labels.data()); },
      "smoothed cross-entropy");
  for (int64_t j = 10; j < 15; ++j) EXPECT_EQ(dlogits[size_t(j)], 0.0f) << "padding row";
}

TEST(TransformerCoresFd, EmbeddingTableGradient) {
  const EmbeddingShape s{4, 3, 5};
  std::vector<float> table = randomVector(12, 12), r = randomVector(15, 13), y(15), dtable(12);
  const std::vector<int32_t> index = {2, 0, 2, 3, 2};
  embeddingBackward(s, r.data(), index.data(), dtable.data());
  expectGradient(
      table, dtable,
      [&] {
        embeddingForward(s, table.data(), index.data(), y.data());
        return dot(y, r);
      },
      "embedding");
}

// ---- Matrix products against a reference in double --------------------------------------

/// Element (b, i, j) of op(X) for X stored [batch or 1, rows, cols].
double opAt(const std::vector<float>& x, bool broadcast, bool transposed, int64_t rows,
            int64_t cols, int64_t b, int64_t i, int64_t j) {
  const int64_t base = (broadcast ? 0 : b) * rows * cols;
  return transposed ? x[size_t(base + j * cols + i)] : x[size_t(base + i * cols + j)];
}

std::vector<double> reference(const MatmulShape& s, const std::vector<float>& a,
                              const std::vector<float>& b) {
  std::vector<double> c(static_cast<size_t>(s.batch * s.m * s.n));
  for (int64_t bt = 0; bt < s.batch; ++bt)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < s.k; ++p)
          sum += opAt(a, s.a_broadcast, s.trans_a, s.aRows(), s.aCols(), bt, i, p) *
                 opAt(b, s.b_broadcast, s.trans_b, s.bRows(), s.bCols(), bt, p, j);
        c[size_t((bt * s.m + i) * s.n + j)] = sum;
      }
  return c;
}

std::vector<float> runProduct(const MatmulShape& s, const std::vector<float>& a,
                              const std::vector<float>& b) {
  MatmulSpec spec;
  spec.shape = s;
  auto core = MatmulCore::make(coreContext(), spec, "test");
  EXPECT_TRUE(core.ok()) << core.status();
  std::vector<float> c(static_cast<size_t>(s.batch * s.m * s.n));
  if (core.ok()) core->run(a.data(), b.data(), nullptr, c.data());
  return c;
}

double maxError(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

/// dA (or dB) as sum over the batch entries that share it of dC's contribution, from
/// the definition: dA[b, i, p] = sum_j dC[b, i, j] op(B)[b, p, j] (transposed back when A
/// is), in double.
std::vector<double> referenceGrad(const MatmulShape& s, const std::vector<float>& other,
                                  const std::vector<float>& dc, bool of_a) {
  const int64_t rows = of_a ? s.aRows() : s.bRows(), cols = of_a ? s.aCols() : s.bCols();
  const int64_t copies = of_a ? s.aBatch() : s.bBatch();
  std::vector<double> g(size_t(copies * rows * cols), 0.0);
  for (int64_t bt = 0; bt < s.batch; ++bt)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j)
        for (int64_t p = 0; p < s.k; ++p) {
          const double d = dc[size_t((bt * s.m + i) * s.n + j)];
          const int64_t copy = (of_a ? s.a_broadcast : s.b_broadcast) ? 0 : bt;
          if (of_a) {
            const double bv = opAt(other, s.b_broadcast, s.trans_b, s.bRows(), s.bCols(), bt, p, j);
            const int64_t at = s.trans_a ? p * cols + i : i * cols + p;
            g[size_t(copy * rows * cols + at)] += d * bv;
          } else {
            const double av = opAt(other, s.a_broadcast, s.trans_a, s.aRows(), s.aCols(), bt, i, p);
            const int64_t at = s.trans_b ? j * cols + p : p * cols + j;
            g[size_t(copy * rows * cols + at)] += d * av;
          }
        }
  return g;
}

TEST(TransformerCoresMatmul, EveryFlagCombinationAndItsGradientsMatchTheDefinition) {
  // f32 sums of k <= 9 products of O(1) values: within 1e-5 of the exact ones.
  int checked = 0;
  for (int flags = 0; flags < 16; ++flags) {
    MatmulShape s{3, 4, 5, 6, bool(flags & 1), bool(flags & 2), bool(flags & 4), bool(flags & 8)};
    if (s.a_broadcast && s.b_broadcast) continue;
    SCOPED_TRACE(backend::describe(s));
    const std::vector<float> a = randomVector(s.aBatch() * s.aRows() * s.aCols(), 20 + flags);
    const std::vector<float> b = randomVector(s.bBatch() * s.bRows() * s.bCols(), 40 + flags);
    const std::vector<float> dc = randomVector(s.batch * s.m * s.n, 60 + flags);
    EXPECT_LE(maxError(runProduct(s, a, b), reference(s, a, b)), 1e-5);
    auto pick = [&](MatmulTensor t) -> const std::vector<float>& {
      return t == MatmulTensor::kA ? a : t == MatmulTensor::kB ? b : dc;
    };
    if (auto ga = backend::matmulGradA(s); ga.ok()) {
      EXPECT_LE(maxError(runProduct(ga->shape, pick(ga->lhs), pick(ga->rhs)),
                         referenceGrad(s, b, dc, true)),
                1e-5)
          << "dA";
      ++checked;
    } else {
      EXPECT_TRUE(s.a_broadcast) << ga.status();
    }
    if (auto gb = backend::matmulGradB(s); gb.ok()) {
      EXPECT_LE(maxError(runProduct(gb->shape, pick(gb->lhs), pick(gb->rhs)),
                         referenceGrad(s, a, dc, false)),
                1e-5)
          << "dB";
      ++checked;
    } else {
      EXPECT_TRUE(s.b_broadcast && (s.trans_a || s.a_broadcast)) << gb.status();
    }
  }
  EXPECT_GE(checked, 18);
}

TEST(TransformerCoresMatmul, UnsupportedBroadcastGradientsSaySo) {
  MatmulShape shared_a{4, 3, 5, 6, false, false, true, false};
  EXPECT_THAT(std::string(backend::matmulGradA(shared_a).status().message()),
              HasSubstr("the gradient of an A shared by the batch is not supported"));
  MatmulShape shared_b_trans_a{4, 3, 5, 6, true, false, false, true};
  EXPECT_THAT(std::string(backend::matmulGradB(shared_b_trans_a).status().message()),
              HasSubstr("needs A untransposed"));
}

// ---- Repeatability and errors --------------------------------------------------------

TEST(TransformerCores, LayerNormBackwardRepeatsItsBits) {
  const LayerNormSpec spec{50, 64, kF32, 1e-6f};
  auto fwd = LayerNormForward::make(coreContext(), spec, "t");
  auto bwd = LayerNormBackward::make(coreContext(), spec, "t");
  ASSERT_TRUE(fwd.ok() && bwd.ok());
  std::vector<float> x = randomVector(3200, 1), dy = randomVector(3200, 2), gamma(64, 1.5f),
                     beta(64, 0.25f), y(3200), mean(50), var(50);
  fwd->run(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), var.data());
  std::vector<float> dx1(3200), dg1(64), db1(64), dx2(3200), dg2(64), db2(64);
  bwd->run(x.data(), dy.data(), mean.data(), var.data(), gamma.data(), dx1.data(), dg1.data(),
           db1.data());
  bwd->run(x.data(), dy.data(), mean.data(), var.data(), gamma.data(), dx2.data(), dg2.data(),
           db2.data());
  EXPECT_EQ(dx1, dx2);
  EXPECT_EQ(dg1, dg2);
  EXPECT_EQ(db1, db2);
}

TEST(TransformerCores, BadSpecsAreErrorsNamingTheCaller) {
  MatmulSpec empty;
  empty.shape = {1, 0, 3, 4};
  EXPECT_THAT(
      std::string(
          MatmulCore::make(coreContext(), empty, "%qk.0 (matmul @cpu:0)").status().message()),
      HasSubstr("%qk.0 (matmul @cpu:0): matmul [1] 0x4 * 4x3 has an empty dimension"));
  MatmulSpec ints;
  ints.shape = {1, 2, 3, 4};
  ints.a = ir::DType::kI32;
  EXPECT_THAT(std::string(MatmulCore::make(coreContext(), ints, "%m").status().message()),
              HasSubstr("%m: matmul's A must be f32 or bf16, not i32"));
  EXPECT_THAT(std::string(backend::splitAtAxis({2, 3}, 2, "%s", "softmax").status().message()),
              HasSubstr("%s: softmax axis 2 is outside a rank-2 tensor"));
  EXPECT_THAT(
      std::string(
          LayerNormForward::make(coreContext(), {4, 8, kF32, 0.0f}, "%ln").status().message()),
      HasSubstr("%ln: layer norm's epsilon must be positive"));
}

TEST(TransformerCores, EmbeddingIndexOutsideTheTableThrowsNamingTheToken) {
  const EmbeddingShape s{4, 2, 3};
  const std::vector<float> table(8, 1.0f);
  std::vector<float> y(6, -7.0f), dtable(8);
  const std::vector<int32_t> index = {1, 4, 0};
  try {
    embeddingForward(s, table.data(), index.data(), y.data());
    ADD_FAILURE() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "embedding: token 1 has index 4, outside the table's 4 rows");
  }
  EXPECT_EQ(y, std::vector<float>(6, -7.0f)) << "nothing written";
  const std::vector<int32_t> negative = {1, 2, -1};
  EXPECT_THROW(embeddingBackward(s, y.data(), negative.data(), dtable.data()), std::out_of_range);
}

TEST(TransformerCores, CrossEntropyWithoutSmoothingIsTheSoftmaxCrossEntropyKernelsBits) {
  // So the wiring can retire softmax_cross_entropy's own loops for this core: at
  // smoothing 0 the loss and its gradient are the existing kernels' bits.
  const int64_t rows = 9, classes = 10;
  SingleOp fwd(ir::Op::kSoftmaxCrossEntropy, {f32({rows, classes}), i32({rows})},
               {{"reduction", ir::EnumWord{"mean"}}, {"divisor", int64_t{16}}});
  // The scalar's type spelled out: f32({}) trips GCC 12's maybe-uninitialized.
  const ir::TensorType scalar{ir::DType::kF32, {}};
  SingleOp bwd(ir::Op::kSoftmaxCrossEntropyBackward, {f32({rows, classes}), i32({rows}), scalar},
               {{"reduction", ir::EnumWord{"mean"}}, {"divisor", int64_t{16}}});
  std::mt19937 rng(3);
  fwd.in(0).fillUniform(rng, -4, 4);
  fwd.in(1).fillInts(rng, -1, int(classes) - 1);
  std::memcpy(bwd.in(0).f32(), fwd.in(0).f32(), sizeof(float) * rows * classes);
  std::memcpy(bwd.in(1).i32(), fwd.in(1).i32(), sizeof(int32_t) * rows);
  *bwd.in(2).f32() = 0.75f;
  fwd.run();
  bwd.run();
  const CrossEntropySpec s{rows, classes, 0.0, 16.0};
  const float loss = crossEntropyForward(s, fwd.in(0).f32(), fwd.in(1).i32());
  EXPECT_EQ(loss, *fwd.out(0).f32());
  std::vector<float> grad(size_t(rows * classes));
  crossEntropyBackward(s, bwd.in(0).f32(), bwd.in(1).i32(), 0.75f, grad.data());
  EXPECT_EQ(grad, std::vector<float>(bwd.out(0).f32(), bwd.out(0).f32() + rows * classes));
}

TEST(TransformerCores, CrossEntropyLabelPastTheClassesIsANanLoss) {
  const CrossEntropySpec s{2, 3, 0.1, 2.0};
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> labels = {0, 3};
  EXPECT_TRUE(std::isnan(crossEntropyForward(s, logits.data(), labels.data())));
}

}  // namespace
}  // namespace tandem::testing
