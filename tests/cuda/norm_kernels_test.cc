// The CUDA batch-norm family (backend/cuda/norm_*). Without a GPU: the kernels' math
// (norm_math.h), driven over whole tensors in host loops that do what norm.cu does (one
// double sum per channel, coefficients per channel, then one pass per element), against
// the CPU backend's kernels. With a GPU: every op on cuda:0 against the CPU backend.

#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/norm_math.h"
#include "gtest/gtest.h"
#include "tests/backend/kernel_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

using backend::cuda::NormAffine;
using backend::cuda::NormBackward;
using backend::cuda::NormStats;

constexpr double kEps = 1e-5, kMomentum = 0.1;

struct Dims {
  int64_t n, c, hw;
  explicit Dims(const ir::Shape& s) : n(s[0]), c(s[1]), hw(s.size() == 4 ? s[2] * s[3] : 1) {}
  int64_t at(int64_t img, int64_t ch, int64_t i) const { return (img * c + ch) * hw + i; }
};

ir::TensorType stats(int64_t c) { return {ir::DType::kF64, {3, c}}; }

/// What channelMoments in norm.cu computes for channel ch: the sum, the mean rounded to
/// float and the squared deviations from it, all in double.
struct Moments {
  double sum = 0, sq = 0;
  float fmean = 0;
};
Moments moments(const float* x, const Dims& d, int64_t ch) {
  Moments m;
  for (int64_t img = 0; img < d.n; ++img)
    for (int64_t i = 0; i < d.hw; ++i) m.sum += x[d.at(img, ch, i)];
  m.fmean = static_cast<float>(m.sum / double(d.n * d.hw));
  for (int64_t img = 0; img < d.n; ++img)
    for (int64_t i = 0; i < d.hw; ++i) {
      const float v = x[d.at(img, ch, i)] - m.fmean;
      m.sq += double(v * v);
    }
  return m;
}

/// The statistics tensor launchChannelStats writes (conv2d_stats).
void writeStats(const float* y, const Dims& d, double* out) {
  for (int64_t ch = 0; ch < d.c; ++ch) {
    const Moments m = moments(y, d, ch);
    const auto r = backend::cuda::statsRow(double(d.n * d.hw), m.sum, m.sq, m.fmean);
    out[ch] = r.count;
    out[d.c + ch] = r.sum;
    out[2 * d.c + ch] = r.sumsq;
  }
}

void fill(SingleOp& op, std::mt19937& rng, const std::vector<std::pair<float, float>>& ranges) {
  for (size_t i = 0; i < ranges.size() && i < op.node().numOperands(); ++i)
    if (op.in(i).type().dtype == ir::DType::kF32)
      op.in(i).fillUniform(rng, ranges[i].first, ranges[i].second);
}

const std::vector<ir::Shape> kShapes = {{4, 3, 5, 5}, {2, 16, 7, 7}, {3, 5, 1, 1}, {6, 7}};

SingleOp trainingBatchNorm(const ir::Shape& s) {
  const ir::TensorType c = f32({s[1]});
  return SingleOp(ir::Op::kBatchNorm, {f32(s), c, c, c, c},
                  {{"training", true}, {"momentum", kMomentum}, {"eps", kEps}}, {}, {}, {3, 4});
}

TEST(CudaNormMath, TrainingBatchNormMatchesCpu) {
  std::mt19937 rng(1);
  for (const ir::Shape& s : kShapes) {
    SCOPED_TRACE(ir::toString(f32(s)));
    SingleOp op = trainingBatchNorm(s);
    fill(op, rng, {{-2, 3}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}});
    const Dims d(s);
    std::vector<float> x(op.in(0).f32(), op.in(0).f32() + op.in(0).size());
    std::vector<float> rm(op.in(3).f32(), op.in(3).f32() + d.c);
    std::vector<float> rv(op.in(4).f32(), op.in(4).f32() + d.c);
    std::vector<float> y(x.size()), mean(d.c), invstd(d.c);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      const Moments m = moments(x.data(), d, ch);
      const double count = double(d.n * d.hw), mu = m.sum / count;
      const double var = backend::cuda::momentsVar(count, m.sum, m.sq, m.fmean);
      const NormAffine a =
          backend::cuda::normAffine(mu, var, op.in(1).f32()[ch], op.in(2).f32()[ch], kEps);
      mean[ch] = m.fmean;
      invstd[ch] = static_cast<float>(a.invstd);
      backend::cuda::updateRunning(&rm[ch], &rv[ch], mu, var, count, kMomentum);
      for (int64_t img = 0; img < d.n; ++img)
        for (int64_t i = 0; i < d.hw; ++i) {
          const int64_t at = d.at(img, ch, i);
          y[at] = backend::cuda::normalizeOne(x[at], a.scale, a.shift, false, 0, false);
        }
    }
    op.run();
    const std::vector<double> cpu_y(op.out(0).f32(), op.out(0).f32() + y.size());
    EXPECT_LE(maxRelativeError(y.data(), cpu_y.data(), static_cast<int64_t>(y.size())), 1e-5);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      EXPECT_NEAR(mean[ch], op.out(1).f32()[ch], 1e-6) << ch;
      EXPECT_NEAR(invstd[ch], op.out(2).f32()[ch], 1e-5 * invstd[ch]) << ch;
      EXPECT_NEAR(rm[ch], op.in(3).f32()[ch], 1e-6) << ch;
      EXPECT_NEAR(rv[ch], op.in(4).f32()[ch], 1e-5) << ch;
    }
  }
}

/// The fused forward and both backward halves with relu and a residual: host loops of the
/// kernels' math against batch_norm_apply, batch_norm_backward_reduce and
/// batch_norm_backward_apply on the CPU.
TEST(CudaNormMath, FusedForwardAndBackwardMatchCpu) {
  std::mt19937 rng(2);
  for (const ir::Shape& s : {ir::Shape{4, 3, 5, 5}, ir::Shape{2, 16, 7, 7}})
    for (bool relu : {false, true})
      for (bool residual : {false, true}) {
        SCOPED_TRACE(ir::toString(f32(s)) + (relu ? " relu" : "") + (residual ? " residual" : ""));
        const Dims d(s);
        const ir::TensorType c = f32({d.c});
        std::vector<ir::TensorType> in{f32(s), stats(d.c), c, c, c, c};
        if (residual) in.push_back(f32(s));
        SingleOp apply(ir::Op::kBatchNormApply, in,
                       {{"eps", kEps}, {"momentum", kMomentum}, {"relu", relu}}, {}, {}, {4, 5});
        fill(apply, rng, {{-2, 3}, {0, 0}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}, {-1, 1}});
        auto* st = static_cast<double*>(apply.in(1).view().data);
        writeStats(apply.in(0).f32(), d, st);
        const float* y = apply.in(0).f32();
        const float* res = residual ? apply.in(6).f32() : nullptr;
        std::vector<float> out(apply.in(0).size()), mean(d.c), invstd(d.c);
        for (int64_t ch = 0; ch < d.c; ++ch) {
          const NormStats ns = backend::cuda::readNormStats(st, d.c, ch);
          const NormAffine a = backend::cuda::normAffine(ns.mean, ns.var, apply.in(2).f32()[ch],
                                                         apply.in(3).f32()[ch], kEps);
          mean[ch] = static_cast<float>(ns.mean);
          invstd[ch] = static_cast<float>(a.invstd);
          for (int64_t img = 0; img < d.n; ++img)
            for (int64_t i = 0; i < d.hw; ++i) {
              const int64_t at = d.at(img, ch, i);
              out[at] = backend::cuda::normalizeOne(y[at], a.scale, a.shift, residual,
                                                    residual ? res[at] : 0.0f, relu);
            }
        }
        apply.run();
        // Same statistics tensor, same coefficient math: the same bits as the CPU.
        for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], apply.out(0).f32()[i]) << i;
        for (int64_t ch = 0; ch < d.c; ++ch) {
          EXPECT_EQ(mean[ch], apply.out(1).f32()[ch]);
          EXPECT_EQ(invstd[ch], apply.out(2).f32()[ch]);
        }

        // Backward: sums (reduce), then dy (apply) from them.
        std::vector<ir::TensorType> rin{f32(s), f32(s), c, c};
        if (relu) rin.push_back(f32(s));
        SingleOp reduce(ir::Op::kBatchNormBackwardReduce, rin);
        reduce.in(0).fillUniform(rng);
        std::copy_n(y, out.size(), reduce.in(1).f32());
        std::copy_n(mean.data(), d.c, reduce.in(2).f32());
        std::copy_n(invstd.data(), d.c, reduce.in(3).f32());
        if (relu) std::copy_n(out.data(), out.size(), reduce.in(4).f32());
        const float* dout = reduce.in(0).f32();
        std::vector<double> sums(2 * d.c);
        std::vector<float> dbeta(d.c), dgamma(d.c);
        for (int64_t ch = 0; ch < d.c; ++ch) {
          for (int64_t img = 0; img < d.n; ++img)
            for (int64_t i = 0; i < d.hw; ++i) {
              const int64_t at = d.at(img, ch, i);
              const float dz = backend::cuda::maskedGrad(dout[at], relu, out[at]);
              sums[ch] += dz;
              sums[d.c + ch] += double(dz * (y[at] - mean[ch]));
            }
          dbeta[ch] = static_cast<float>(sums[ch]);
          dgamma[ch] = static_cast<float>(sums[d.c + ch] * double(invstd[ch]));
        }
        reduce.run();
        const auto* cpu_sums = static_cast<const double*>(reduce.out(0).view().data);
        for (int64_t k = 0; k < 2 * d.c; ++k)
          EXPECT_NEAR(sums[k], cpu_sums[k], 1e-5 * (1 + std::abs(cpu_sums[k]))) << k;
        for (int64_t ch = 0; ch < d.c; ++ch) {
          EXPECT_NEAR(dbeta[ch], reduce.out(1).f32()[ch], 1e-5 * (1 + std::abs(dbeta[ch])));
          EXPECT_NEAR(dgamma[ch], reduce.out(2).f32()[ch], 1e-5 * (1 + std::abs(dgamma[ch])));
        }

        std::vector<ir::TensorType> ain{f32(s), f32(s), c, c, c, {ir::DType::kF64, {2, d.c}},
                                        stats(d.c)};
        if (relu) ain.push_back(f32(s));
        SingleOp back(ir::Op::kBatchNormBackwardApply, ain, {{"residual", residual}});
        std::copy_n(dout, out.size(), back.in(0).f32());
        std::copy_n(y, out.size(), back.in(1).f32());
        std::copy_n(apply.in(2).f32(), d.c, back.in(2).f32());
        std::copy_n(mean.data(), d.c, back.in(3).f32());
        std::copy_n(invstd.data(), d.c, back.in(4).f32());
        std::copy_n(sums.data(), 2 * d.c, static_cast<double*>(back.in(5).view().data));
        std::copy_n(st, 3 * d.c, static_cast<double*>(back.in(6).view().data));
        if (relu) std::copy_n(out.data(), out.size(), back.in(7).f32());
        std::vector<float> dy(out.size()), dz(out.size());
        for (int64_t ch = 0; ch < d.c; ++ch) {
          const NormBackward k = backend::cuda::normBackward(
              st[ch], sums[ch], sums[d.c + ch], back.in(2).f32()[ch], invstd[ch]);
          for (int64_t img = 0; img < d.n; ++img)
            for (int64_t i = 0; i < d.hw; ++i) {
              const int64_t at = d.at(img, ch, i);
              dz[at] = backend::cuda::maskedGrad(dout[at], relu, out[at]);
              dy[at] = backend::cuda::normBackwardOne(k, dz[at], y[at], mean[ch]);
            }
        }
        back.run();
        // Given the same sums, the same coefficient and element math: the same bits.
        for (size_t i = 0; i < dy.size(); ++i) ASSERT_EQ(dy[i], back.out(0).f32()[i]) << i;
        if (residual) {
          for (size_t i = 0; i < dz.size(); ++i) ASSERT_EQ(dz[i], back.out(1).f32()[i]) << i;
        }
      }
}

TEST(CudaNormMath, FoldBatchNormMatchesCpu) {
  std::mt19937 rng(3);
  for (bool bias : {false, true}) {
    const ir::TensorType w = f32({8, 3, 3, 3}), c = f32({8});
    std::vector<ir::TensorType> in{w};
    if (bias) in.push_back(c);
    for (int i = 0; i < 4; ++i) in.push_back(c);
    SingleOp op(ir::Op::kFoldBatchNorm, in, {{"eps", kEps}});
    for (size_t i = 0; i < in.size(); ++i) op.in(i).fillUniform(rng, 0.5, 1.5);
    op.run();
    const size_t g = bias ? 2 : 1;
    for (int64_t o = 0; o < 8; ++o) {
      const double scale =
          backend::cuda::foldScale(op.in(g).f32()[o], op.in(g + 3).f32()[o], kEps);
      for (int64_t i = 0; i < 27; ++i)
        ASSERT_EQ(op.in(0).f32()[o * 27 + i] * static_cast<float>(scale),
                  op.out(0).f32()[o * 27 + i]);
      EXPECT_EQ(backend::cuda::foldBias(bias ? op.in(1).f32()[o] : 0.0, op.in(g + 2).f32()[o],
                                        scale, op.in(g + 1).f32()[o]),
                op.out(1).f32()[o]);
    }
  }
}

// With a GPU: every op of the family on cuda:0 against the CPU backend.
TEST(CudaNormKernels, BatchNormTrainingAndInferenceMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  for (const ir::Shape& s : kShapes)
    for (bool training : {true, false}) {
      SCOPED_TRACE(ir::toString(f32(s)) + (training ? " training" : " inference"));
      const ir::TensorType c = f32({s[1]});
      SingleOp op(ir::Op::kBatchNorm, {f32(s), c, c, c, c},
                  {{"training", training}, {"momentum", kMomentum}, {"eps", kEps}}, {}, {},
                  {3, 4});
      fill(op, rng, {{-2, 3}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}});
      expectCudaMatchesCpu(op, 1e-4);
    }
}

TEST(CudaNormKernels, BatchNormBackwardMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (const ir::Shape& s : kShapes) {
    const ir::TensorType c = f32({s[1]});
    SingleOp op(ir::Op::kBatchNormBackward, {f32(s), f32(s), c, c, c}, {{"eps", kEps}});
    fill(op, rng, {{-1, 1}, {-2, 3}, {0.5, 1.5}, {0, 0.5}, {0.5, 2}});
    expectCudaMatchesCpu(op, 1e-4);
  }
}

TEST(CudaNormKernels, FusedOpsMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  for (const ir::Shape& s : {ir::Shape{4, 3, 5, 5}, ir::Shape{8, 64, 14, 14}})
    for (bool relu : {false, true})
      for (bool residual : {false, true}) {
        const Dims d(s);
        const ir::TensorType c = f32({d.c});
        std::vector<ir::TensorType> in{f32(s), stats(d.c), c, c, c, c};
        if (residual) in.push_back(f32(s));
        SingleOp apply(ir::Op::kBatchNormApply, in,
                       {{"eps", kEps}, {"momentum", kMomentum}, {"relu", relu}}, {}, {}, {4, 5});
        fill(apply, rng, {{-2, 3}, {0, 0}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}, {-1, 1}});
        writeStats(apply.in(0).f32(), d, static_cast<double*>(apply.in(1).view().data));
        expectCudaMatchesCpu(apply, 1e-4);

        SingleOp recompute(ir::Op::kBatchNormRecompute, {f32(s), stats(d.c), c, c},
                           {{"eps", kEps}, {"relu", relu}});
        for (size_t i : {0, 2, 3})
          std::copy_n(apply.in(i).f32(), apply.in(i).size(), recompute.in(i).f32());
        std::copy_n(static_cast<double*>(apply.in(1).view().data), 3 * d.c,
                    static_cast<double*>(recompute.in(1).view().data));
        expectCudaMatchesCpu(recompute, 1e-4);

        std::vector<ir::TensorType> rin{f32(s), f32(s), c, c};
        if (relu) rin.push_back(f32(s));
        SingleOp reduce(ir::Op::kBatchNormBackwardReduce, rin);
        fill(reduce, rng, {{-1, 1}, {-2, 3}, {0, 0.5}, {0.5, 2}, {-1, 1}});
        expectCudaMatchesCpu(reduce, 1e-4);

        std::vector<ir::TensorType> ain{f32(s), f32(s), c, c, c, {ir::DType::kF64, {2, d.c}},
                                        stats(d.c)};
        if (relu) ain.push_back(f32(s));
        SingleOp back(ir::Op::kBatchNormBackwardApply, ain, {{"residual", residual}});
        fill(back, rng, {{-1, 1}, {-2, 3}, {0.5, 1.5}, {0, 0.5}, {0.5, 2}, {0, 0}, {0, 0}, {-1, 1}});
        auto* sums = static_cast<double*>(back.in(5).view().data);
        auto* st = static_cast<double*>(back.in(6).view().data);
        for (int64_t ch = 0; ch < d.c; ++ch) {
          sums[ch] = 0.25 * double(ch + 1);
          sums[d.c + ch] = -0.5 * double(ch);
        }
        writeStats(back.in(1).f32(), d, st);
        expectCudaMatchesCpu(back, 1e-4);
      }
}

TEST(CudaNormKernels, FoldBatchNormMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  const ir::TensorType w = f32({16, 8, 3, 3}), c = f32({16});
  SingleOp op(ir::Op::kFoldBatchNorm, {w, c, c, c, c, c}, {{"eps", kEps}});
  for (size_t i = 0; i < 6; ++i) op.in(i).fillUniform(rng, 0.5, 1.5);
  expectCudaMatchesCpu(op, 1e-6);
}

}  // namespace
}  // namespace tandem::testing
