// The CUDA batch-norm family (backend/cuda/norm_*). Without a GPU: the kernels' math
// (norm_math.h), driven over whole tensors in host loops that do what norm.cu does (per
// channel, kNormReduceThreads "threads" each adding in double the values its ChannelWalk
// visits, then the block's fixed tree; coefficients per channel; one pass per element),
// against the CPU backend's kernels, with f32 and bf16 activations. With a GPU: every op
// on cuda:0 against the CPU backend, and the statistics bit-identical run to run.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/norm_launch.h"
#include "backend/cuda/norm_math.h"
#include "gtest/gtest.h"
#include "tests/backend/kernel_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

using backend::cuda::ChannelOf;
using backend::cuda::ChannelWalk;
using backend::cuda::kNormReduceThreads;
using backend::cuda::NormAffine;
using backend::cuda::NormBackward;
using backend::cuda::NormStats;

constexpr double kEps = 1e-5, kMomentum = 0.1;

struct Dims {
  int64_t n, c, hw;
  explicit Dims(const ir::Shape& s) : n(s[0]), c(s[1]), hw(s.size() == 4 ? s[2] * s[3] : 1) {}
  int64_t at(int64_t img, int64_t ch, int64_t i) const { return (img * c + ch) * hw + i; }
  int64_t m() const { return n * hw; }
};

ir::TensorType stats(int64_t c) { return {ir::DType::kF64, {3, c}}; }
ir::TensorType sumsType(int64_t c) { return {ir::DType::kF64, {2, c}}; }

/// Activations as the CUDA math reads them: float, or bf16 bits (uint16_t).
template <typename T>
constexpr bool kBf16 = std::is_same_v<T, uint16_t>;
template <typename T>
ir::TensorType act(const ir::Shape& s) {
  return kBf16<T> ? bf16(s) : f32(s);
}
template <typename T>
T* data(Buffer& b) {
  return reinterpret_cast<T*>(b.view().data);
}
template <typename T>
std::string dtypeName() {
  return kBf16<T> ? "bf16" : "f32";
}

/// Uniform values in [lo, hi) in an f32 or bf16 buffer (bf16: rounded to it).
void fillAct(Buffer& b, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < b.size(); ++i) {
    if (b.type().dtype == ir::DType::kBF16)
      b.bf16()[i] = d(rng);
    else
      b.f32()[i] = d(rng);
  }
}

/// Fills operand i with values from ranges[i] (f32 and bf16 operands; f64 left alone).
void fill(SingleOp& op, std::mt19937& rng, const std::vector<std::pair<float, float>>& ranges) {
  for (size_t i = 0; i < ranges.size() && i < op.node().numOperands(); ++i)
    if (op.in(i).type().dtype != ir::DType::kF64)
      fillAct(op.in(i), rng, ranges[i].first, ranges[i].second);
}

/// What one block of a per-channel reduction in norm.cu sums for channel ch: thread t adds
/// term(at) in double over the elements its ChannelWalk visits (k = t, t + T, ...), then
/// the threads' sums meet in the fixed tree of blockSum.
template <typename F>
double channelSum(const Dims& d, int64_t ch, F term) {
  std::vector<double> part(kNormReduceThreads, 0.0);
  for (int64_t t = 0; t < kNormReduceThreads && t < d.m(); ++t) {
    ChannelWalk w(t, ch, d.c, d.hw, kNormReduceThreads);
    for (int64_t k = t; k < d.m(); k += kNormReduceThreads, w.next()) part[t] += term(w.at);
  }
  for (int s = kNormReduceThreads / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; ++t) part[t] += part[t + s];
  return part[0];
}

/// What channelMoments in norm.cu computes for channel ch: the sum, the mean rounded to
/// float and the squared deviations from it.
struct Moments {
  double sum = 0, sq = 0;
  float fmean = 0;
};
template <typename T>
Moments moments(const T* x, const Dims& d, int64_t ch) {
  Moments m;
  m.sum = channelSum(d, ch, [&](int64_t at) { return double(backend::cuda::load(x, at)); });
  m.fmean = static_cast<float>(m.sum / double(d.m()));
  m.sq = channelSum(d, ch, [&](int64_t at) {
    const float v = backend::cuda::load(x, at) - m.fmean;
    return double(v * v);
  });
  return m;
}

/// The statistics tensor launchChannelStats writes (conv2d_stats).
template <typename T>
void writeStats(const T* y, const Dims& d, double* out) {
  for (int64_t ch = 0; ch < d.c; ++ch) {
    const Moments m = moments(y, d, ch);
    const auto r = backend::cuda::statsRow(double(d.m()), m.sum, m.sq, m.fmean);
    out[ch] = r.count;
    out[d.c + ch] = r.sum;
    out[2 * d.c + ch] = r.sumsq;
  }
}

/// The elementwise passes' loop: f(l, channel) for l in [0, total) as the grid-stride
/// threads of norm.cu visit them (thread g from g in steps of `threads`), the channel from
/// ChannelOf.
template <typename F>
void forElements(const Dims& d, int64_t threads, F f) {
  const int64_t total = d.n * d.c * d.hw;
  for (int64_t g = 0; g < threads && g < total; ++g) {
    ChannelOf w(g, d.c, d.hw, threads);
    for (int64_t l = g; l < total; l += threads, w.next()) f(l, w.ch);
  }
}
constexpr int64_t kGridThreads = 3 * 256;  // a small grid, so each thread takes many steps

/// a within one bf16 rounding of b (f32: within 1e-5 of the tensor's scale): where the
/// coefficients differ in their last float bit, the rounding to bf16 may go the other way.
template <typename T>
void expectNearAct(const T* a, Buffer& b, double tol_f32, const std::string& what) {
  double scale = 0;
  for (int64_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::abs(b.at(i)));
  for (int64_t i = 0; i < b.size(); ++i) {
    const double x = backend::cuda::load(a, i), y = b.at(i);
    const double tol = kBf16<T> ? std::ldexp(std::abs(y), -7) + 1e-6 * scale : tol_f32 * scale;
    ASSERT_LE(std::abs(x - y), tol) << what << " element " << i;
  }
}
/// a equal to b bit for bit.
template <typename T>
void expectSameAct(const T* a, Buffer& b, const std::string& what) {
  ASSERT_EQ(std::memcmp(a, b.view().data, static_cast<size_t>(b.type().bytes())), 0) << what;
}

const std::vector<ir::Shape> kShapes = {{4, 3, 5, 5}, {2, 16, 7, 7}, {3, 5, 1, 1}, {6, 7},
                                        {5, 4, 17, 19}, {1500, 3}};
const std::vector<ir::Shape> kImageShapes = {{4, 3, 5, 5}, {2, 16, 7, 7}, {5, 4, 17, 19}};

TEST(CudaNormMath, ChannelWalkVisitsTheChannelInOrder) {
  for (const ir::Shape& s : std::vector<ir::Shape>{{3, 4, 5}, {7, 3, 1}, {2, 2, 1000}, {9, 5, 16}})
    for (int64_t step : {1, 3, 16, 64, 1024})
      for (int64_t ch = 0; ch < s[1]; ++ch) {
        const int64_t n = s[0], c = s[1], hw = s[2], m = n * hw;
        for (int64_t k0 = 0; k0 < std::min(step, m); ++k0) {
          ChannelWalk w(k0, ch, c, hw, step);
          for (int64_t k = k0; k < m; k += step, w.next()) {
            ASSERT_EQ(w.at, ((k / hw) * c + ch) * hw + k % hw)
                << "k " << k << " step " << step << " hw " << hw;
            ASSERT_EQ(w.i, k % hw);
          }
        }
      }
}

TEST(CudaNormMath, ChannelOfFollowsTheElements) {
  for (const ir::Shape& s : std::vector<ir::Shape>{{3, 4, 5}, {7, 3, 1}, {2, 2, 1000}, {9, 5, 16}})
    for (int64_t step : {1, 7, 256, 4096, 540672}) {
      const int64_t c = s[1], hw = s[2], total = s[0] * c * hw;
      for (int64_t l0 : {int64_t{0}, int64_t{1}, hw, c * hw - 1, total - 1}) {
        ChannelOf w(l0, c, hw, step);
        for (int64_t l = l0; l < total; l += step, w.next()) {
          ASSERT_EQ(w.ch, (l / hw) % c) << "l " << l << " step " << step;
          ASSERT_EQ(w.i, l % hw);
        }
      }
    }
}

SingleOp batchNorm(ir::TensorType x, bool training) {
  const ir::TensorType c = f32({x.shape[1]});
  return SingleOp(ir::Op::kBatchNorm, {std::move(x), c, c, c, c},
                  {{"training", training}, {"momentum", kMomentum}, {"eps", kEps}}, {}, {},
                  {3, 4});
}

template <typename T>
void trainingBatchNormMatchesCpu() {
  std::mt19937 rng(1);
  for (const ir::Shape& s : kShapes) {
    SCOPED_TRACE(ir::toString(act<T>(s)));
    SingleOp op = batchNorm(act<T>(s), true);
    fill(op, rng, {{-2, 3}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}});
    const Dims d(s);
    const T* x = data<T>(op.in(0));
    std::vector<T> y(op.in(0).size());
    std::vector<float> rm(op.in(3).f32(), op.in(3).f32() + d.c);
    std::vector<float> rv(op.in(4).f32(), op.in(4).f32() + d.c);
    std::vector<float> mean(d.c), invstd(d.c), coef(2 * d.c);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      const Moments m = moments(x, d, ch);
      const double count = double(d.m()), mu = m.sum / count;
      const double var = backend::cuda::momentsVar(count, m.sum, m.sq, m.fmean);
      const NormAffine a =
          backend::cuda::normAffine(mu, var, op.in(1).f32()[ch], op.in(2).f32()[ch], kEps);
      coef[ch] = a.scale;
      coef[d.c + ch] = a.shift;
      mean[ch] = m.fmean;
      invstd[ch] = static_cast<float>(a.invstd);
      backend::cuda::updateRunning(&rm[ch], &rv[ch], mu, var, count, kMomentum);
    }
    forElements(d, kGridThreads, [&](int64_t l, int64_t ch) {
      backend::cuda::store(y.data(), l,
                           backend::cuda::normalizeOne(backend::cuda::load(x, l), coef[ch],
                                                       coef[d.c + ch], false, 0, false));
    });
    op.run();
    expectNearAct(y.data(), op.out(0), 1e-5, "y");
    for (int64_t ch = 0; ch < d.c; ++ch) {
      EXPECT_NEAR(mean[ch], op.out(1).f32()[ch], 1e-6) << ch;
      EXPECT_NEAR(invstd[ch], op.out(2).f32()[ch], 1e-5 * invstd[ch]) << ch;
      EXPECT_NEAR(rm[ch], op.in(3).f32()[ch], 1e-6) << ch;
      EXPECT_NEAR(rv[ch], op.in(4).f32()[ch], 1e-5) << ch;
    }
  }
}
TEST(CudaNormMath, TrainingBatchNormMatchesCpu) { trainingBatchNormMatchesCpu<float>(); }
TEST(CudaNormMath, TrainingBatchNormMatchesCpuBf16) { trainingBatchNormMatchesCpu<uint16_t>(); }

/// Inference: the same double coefficients and float arithmetic as the CPU, so the same
/// bits, f32 and bf16.
template <typename T>
void inferenceBatchNormMatchesCpu() {
  std::mt19937 rng(11);
  for (const ir::Shape& s : kShapes) {
    SCOPED_TRACE(ir::toString(act<T>(s)));
    SingleOp op = batchNorm(act<T>(s), false);
    fill(op, rng, {{-2, 3}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}});
    const Dims d(s);
    const T* x = data<T>(op.in(0));
    std::vector<float> coef(2 * d.c);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      const NormAffine a =
          backend::cuda::inferenceAffine(op.in(3).f32()[ch], op.in(4).f32()[ch],
                                         op.in(1).f32()[ch], op.in(2).f32()[ch], kEps);
      coef[ch] = a.scale;
      coef[d.c + ch] = a.shift;
    }
    std::vector<T> y(op.in(0).size());
    forElements(d, kGridThreads, [&](int64_t l, int64_t ch) {
      backend::cuda::store(y.data(), l,
                           backend::cuda::normalizeOne(backend::cuda::load(x, l), coef[ch],
                                                       coef[d.c + ch], false, 0, false));
    });
    op.run();
    expectSameAct(y.data(), op.out(0), "y");
  }
}
TEST(CudaNormMath, InferenceBatchNormMatchesCpu) { inferenceBatchNormMatchesCpu<float>(); }
TEST(CudaNormMath, InferenceBatchNormMatchesCpuBf16) { inferenceBatchNormMatchesCpu<uint16_t>(); }

/// batch_norm_backward: the sums as backwardSumsKernel adds them, the coefficients from the
/// count n * hw, then dx per element.
template <typename T>
void batchNormBackwardMatchesCpu() {
  std::mt19937 rng(12);
  for (const ir::Shape& s : kShapes) {
    SCOPED_TRACE(ir::toString(act<T>(s)));
    const Dims d(s);
    const ir::TensorType c = f32({d.c});
    SingleOp op(ir::Op::kBatchNormBackward, {act<T>(s), act<T>(s), c, c, c}, {{"eps", kEps}});
    fill(op, rng, {{-1, 1}, {-2, 3}, {0.5, 1.5}, {0, 0.5}, {0.5, 2}});
    const T *dy = data<T>(op.in(0)), *x = data<T>(op.in(1));
    const float *gamma = op.in(2).f32(), *mean = op.in(3).f32(), *invstd = op.in(4).f32();
    std::vector<float> coef(3 * d.c), dgamma(d.c), dbeta(d.c);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      const double sum_dz =
          channelSum(d, ch, [&](int64_t at) { return double(backend::cuda::load(dy, at)); });
      const double sum_dz_yc = channelSum(d, ch, [&](int64_t at) {
        return double(backend::cuda::load(dy, at) * (backend::cuda::load(x, at) - mean[ch]));
      });
      dbeta[ch] = static_cast<float>(sum_dz);
      dgamma[ch] = static_cast<float>(sum_dz_yc * double(invstd[ch]));
      const NormBackward k =
          backend::cuda::normBackward(double(d.m()), sum_dz, sum_dz_yc, gamma[ch], invstd[ch]);
      coef[ch] = k.a, coef[d.c + ch] = k.b, coef[2 * d.c + ch] = k.c;
    }
    std::vector<T> dx(op.in(0).size());
    forElements(d, kGridThreads, [&](int64_t l, int64_t ch) {
      const NormBackward k{coef[ch], coef[d.c + ch], coef[2 * d.c + ch]};
      backend::cuda::store(dx.data(), l,
                           backend::cuda::normBackwardOne(k, backend::cuda::load(dy, l),
                                                          backend::cuda::load(x, l), mean[ch]));
    });
    op.run();
    expectNearAct(dx.data(), op.out(0), 1e-5, "dx");
    for (int64_t ch = 0; ch < d.c; ++ch) {
      EXPECT_NEAR(dgamma[ch], op.out(1).f32()[ch], 1e-5 * (1 + std::abs(dgamma[ch]))) << ch;
      EXPECT_NEAR(dbeta[ch], op.out(2).f32()[ch], 1e-5 * (1 + std::abs(dbeta[ch]))) << ch;
    }
  }
}
TEST(CudaNormMath, BatchNormBackwardMatchesCpu) { batchNormBackwardMatchesCpu<float>(); }
TEST(CudaNormMath, BatchNormBackwardMatchesCpuBf16) { batchNormBackwardMatchesCpu<uint16_t>(); }

/// conv2d_stats: a 1x1 identity convolution on the CPU (its output is x exactly), so its
/// statistics are those of x, against what launchChannelStats computes from x. bf16: the
/// CPU's statistics of bf16 values read into float are those of the same values in f32,
/// so the f32 node over x rounded to bf16 is the reference (no bf16 convolution needed).
template <typename T>
void channelStatsMatchCpu() {
  std::mt19937 rng(13);
  for (const ir::Shape& s : kImageShapes) {
    SCOPED_TRACE(ir::toString(act<T>(s)));
    const Dims d(s);
    SingleOp op(ir::Op::kConv2dStats, {f32(s), f32({d.c, d.c, 1, 1})},
                {{"stride", int64_t{1}}, {"pad", int64_t{0}}});
    Buffer x(act<T>(s));
    fillAct(x, rng, -2, 3);
    for (int64_t i = 0; i < x.size(); ++i) op.in(0).f32()[i] = static_cast<float>(x.at(i));
    for (int64_t o = 0; o < d.c; ++o) op.in(1).f32()[o * d.c + o] = 1;
    std::vector<double> st(3 * d.c);
    writeStats(data<T>(x), d, st.data());
    op.run();
    const double* cpu = op.out(1).f64();
    for (int64_t ch = 0; ch < d.c; ++ch) {
      EXPECT_EQ(st[ch], cpu[ch]) << "count " << ch;
      EXPECT_NEAR(st[d.c + ch], cpu[d.c + ch], 1e-6 * (1 + std::abs(cpu[d.c + ch]))) << ch;
      EXPECT_NEAR(st[2 * d.c + ch], cpu[2 * d.c + ch], 1e-6 * cpu[2 * d.c + ch]) << ch;
    }
  }
}
TEST(CudaNormMath, ChannelStatsMatchCpu) { channelStatsMatchCpu<float>(); }
TEST(CudaNormMath, ChannelStatsMatchCpuBf16) { channelStatsMatchCpu<uint16_t>(); }

/// The fused forward and both backward halves with relu and a residual: host loops of the
/// kernels' math against batch_norm_apply, batch_norm_recompute, batch_norm_backward_reduce
/// and batch_norm_backward_apply on the CPU.
template <typename T>
void fusedForwardAndBackwardMatchCpu() {
  std::mt19937 rng(2);
  for (const ir::Shape& s : kImageShapes)
    for (bool relu : {false, true})
      for (bool residual : {false, true}) {
        SCOPED_TRACE(ir::toString(act<T>(s)) + (relu ? " relu" : "") +
                     (residual ? " residual" : ""));
        const Dims d(s);
        const ir::TensorType c = f32({d.c});
        std::vector<ir::TensorType> in{act<T>(s), stats(d.c), c, c, c, c};
        if (residual) in.push_back(act<T>(s));
        SingleOp apply(ir::Op::kBatchNormApply, in,
                       {{"eps", kEps}, {"momentum", kMomentum}, {"relu", relu}}, {}, {}, {4, 5});
        fill(apply, rng, {{-2, 3}, {0, 0}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}, {-1, 1}});
        double* st = apply.in(1).f64();
        writeStats(data<T>(apply.in(0)), d, st);
        const T* y = data<T>(apply.in(0));
        const T* res = residual ? data<T>(apply.in(6)) : nullptr;
        std::vector<float> rm(apply.in(4).f32(), apply.in(4).f32() + d.c);
        std::vector<float> rv(apply.in(5).f32(), apply.in(5).f32() + d.c);
        std::vector<float> mean(d.c), invstd(d.c), coef(2 * d.c);
        for (int64_t ch = 0; ch < d.c; ++ch) {
          const NormStats ns = backend::cuda::readNormStats(st, d.c, ch);
          const NormAffine a = backend::cuda::normAffine(ns.mean, ns.var, apply.in(2).f32()[ch],
                                                         apply.in(3).f32()[ch], kEps);
          coef[ch] = a.scale;
          coef[d.c + ch] = a.shift;
          mean[ch] = static_cast<float>(ns.mean);
          invstd[ch] = static_cast<float>(a.invstd);
          backend::cuda::updateRunning(&rm[ch], &rv[ch], ns.mean, ns.var, ns.count, kMomentum);
        }
        std::vector<T> out(apply.in(0).size());
        forElements(d, kGridThreads, [&](int64_t l, int64_t ch) {
          const float r = residual ? backend::cuda::load(res, l) : 0.0f;
          backend::cuda::store(out.data(), l,
                               backend::cuda::normalizeOne(backend::cuda::load(y, l), coef[ch],
                                                           coef[d.c + ch], residual, r, relu));
        });
        apply.run();
        // Same statistics tensor, same coefficient math: the same bits as the CPU.
        expectSameAct(out.data(), apply.out(0), "out");
        for (int64_t ch = 0; ch < d.c; ++ch) {
          EXPECT_EQ(mean[ch], apply.out(1).f32()[ch]);
          EXPECT_EQ(invstd[ch], apply.out(2).f32()[ch]);
          EXPECT_EQ(rm[ch], apply.in(4).f32()[ch]);
          EXPECT_EQ(rv[ch], apply.in(5).f32()[ch]);
        }

        // batch_norm_recompute: apply's output without the residual, the same bits.
        if (!residual) {
          SingleOp recompute(ir::Op::kBatchNormRecompute, {act<T>(s), stats(d.c), c, c},
                             {{"eps", kEps}, {"relu", relu}});
          for (size_t i : {0, 1, 2, 3})
            std::memcpy(recompute.in(i).view().data, apply.in(i).view().data,
                        static_cast<size_t>(apply.in(i).type().bytes()));
          recompute.run();
          expectSameAct(out.data(), recompute.out(0), "recomputed out");
        }

        // Backward: sums (reduce), then dy (apply) from them.
        std::vector<ir::TensorType> rin{act<T>(s), act<T>(s), c, c};
        if (relu) rin.push_back(act<T>(s));
        SingleOp reduce(ir::Op::kBatchNormBackwardReduce, rin);
        fillAct(reduce.in(0), rng, -1, 1);
        std::memcpy(data<T>(reduce.in(1)), y, out.size() * sizeof(T));
        std::copy_n(mean.data(), d.c, reduce.in(2).f32());
        std::copy_n(invstd.data(), d.c, reduce.in(3).f32());
        if (relu) std::memcpy(data<T>(reduce.in(4)), out.data(), out.size() * sizeof(T));
        const T* dout = data<T>(reduce.in(0));
        auto dz = [&](int64_t at) {
          return backend::cuda::maskedGrad(backend::cuda::load(dout, at), relu,
                                           relu ? backend::cuda::load(out.data(), at) : 0.0f);
        };
        std::vector<double> sums(2 * d.c);
        std::vector<float> dbeta(d.c), dgamma(d.c);
        for (int64_t ch = 0; ch < d.c; ++ch) {
          sums[ch] = channelSum(d, ch, [&](int64_t at) { return double(dz(at)); });
          sums[d.c + ch] = channelSum(d, ch, [&](int64_t at) {
            return double(dz(at) * (backend::cuda::load(y, at) - mean[ch]));
          });
          dbeta[ch] = static_cast<float>(sums[ch]);
          dgamma[ch] = static_cast<float>(sums[d.c + ch] * double(invstd[ch]));
        }
        reduce.run();
        const double* cpu_sums = reduce.out(0).f64();
        for (int64_t k = 0; k < 2 * d.c; ++k)
          EXPECT_NEAR(sums[k], cpu_sums[k], 1e-5 * (1 + std::abs(cpu_sums[k]))) << k;
        for (int64_t ch = 0; ch < d.c; ++ch) {
          EXPECT_NEAR(dbeta[ch], reduce.out(1).f32()[ch], 1e-5 * (1 + std::abs(dbeta[ch])));
          EXPECT_NEAR(dgamma[ch], reduce.out(2).f32()[ch], 1e-5 * (1 + std::abs(dgamma[ch])));
        }

        std::vector<ir::TensorType> ain{act<T>(s), act<T>(s), c, c, c, sumsType(d.c),
                                        stats(d.c)};
        if (relu) ain.push_back(act<T>(s));
        SingleOp back(ir::Op::kBatchNormBackwardApply, ain, {{"residual", residual}});
        std::memcpy(data<T>(back.in(0)), dout, out.size() * sizeof(T));
        std::memcpy(data<T>(back.in(1)), y, out.size() * sizeof(T));
        std::copy_n(apply.in(2).f32(), d.c, back.in(2).f32());
        std::copy_n(mean.data(), d.c, back.in(3).f32());
        std::copy_n(invstd.data(), d.c, back.in(4).f32());
        std::copy_n(sums.data(), 2 * d.c, back.in(5).f64());
        std::copy_n(st, 3 * d.c, back.in(6).f64());
        if (relu) std::memcpy(data<T>(back.in(7)), out.data(), out.size() * sizeof(T));
        std::vector<float> bcoef(3 * d.c);
        for (int64_t ch = 0; ch < d.c; ++ch) {
          const NormBackward k = backend::cuda::normBackward(
              st[ch], sums[ch], sums[d.c + ch], back.in(2).f32()[ch], invstd[ch]);
          bcoef[ch] = k.a, bcoef[d.c + ch] = k.b, bcoef[2 * d.c + ch] = k.c;
        }
        std::vector<T> dy(out.size()), dz_out(out.size());
        forElements(d, kGridThreads, [&](int64_t l, int64_t ch) {
          const NormBackward k{bcoef[ch], bcoef[d.c + ch], bcoef[2 * d.c + ch]};
          const float g = dz(l);
          backend::cuda::store(dy.data(), l,
                               backend::cuda::normBackwardOne(k, g, backend::cuda::load(y, l),
                                                              mean[ch]));
          backend::cuda::store(dz_out.data(), l, g);
        });
        back.run();
        // Given the same sums, the same coefficient and element math: the same bits.
        expectSameAct(dy.data(), back.out(0), "dy");
        if (residual) expectSameAct(dz_out.data(), back.out(1), "dz");
      }
}
TEST(CudaNormMath, FusedForwardAndBackwardMatchCpu) { fusedForwardAndBackwardMatchCpu<float>(); }
TEST(CudaNormMath, FusedForwardAndBackwardMatchCpuBf16) {
  fusedForwardAndBackwardMatchCpu<uint16_t>();
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

// With a GPU: every op of the family on cuda:0 against the CPU backend, f32 and bf16.

/// The tolerance of a comparison with the CPU: f32 1e-4, bf16 2e-2.
template <typename T>
constexpr double kTol = kBf16<T> ? 2e-2 : 1e-4;

const std::vector<ir::Shape> kGpuShapes = {{4, 3, 5, 5}, {2, 16, 7, 7}, {3, 5, 1, 1}, {6, 7},
                                           {1500, 3}, {32, 64, 28, 28}, {5, 4, 17, 19}};
const std::vector<ir::Shape> kGpuImageShapes = {{4, 3, 5, 5}, {8, 64, 14, 14}, {5, 4, 17, 19},
                                                {32, 64, 28, 28}};

template <typename T>
void gpuBatchNorm() {
  std::mt19937 rng(4);
  for (const ir::Shape& s : kGpuShapes)
    for (bool training : {true, false}) {
      SCOPED_TRACE(ir::toString(act<T>(s)) + (training ? " training" : " inference"));
      SingleOp op = batchNorm(act<T>(s), training);
      fill(op, rng, {{-2, 3}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}});
      expectCudaMatchesCpu(op, kTol<T>);
    }
}
TEST(CudaNormKernels, BatchNormTrainingAndInferenceMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuBatchNorm<float>();
}
TEST(CudaNormKernels, BatchNormTrainingAndInferenceMatchCpuBf16) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuBatchNorm<uint16_t>();
}

template <typename T>
void gpuBatchNormBackward() {
  std::mt19937 rng(5);
  for (const ir::Shape& s : kGpuShapes) {
    SCOPED_TRACE(ir::toString(act<T>(s)));
    const ir::TensorType c = f32({s[1]});
    SingleOp op(ir::Op::kBatchNormBackward, {act<T>(s), act<T>(s), c, c, c}, {{"eps", kEps}});
    fill(op, rng, {{-1, 1}, {-2, 3}, {0.5, 1.5}, {0, 0.5}, {0.5, 2}});
    expectCudaMatchesCpu(op, kTol<T>);
  }
}
TEST(CudaNormKernels, BatchNormBackwardMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuBatchNormBackward<float>();
}
TEST(CudaNormKernels, BatchNormBackwardMatchesCpuBf16) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuBatchNormBackward<uint16_t>();
}

template <typename T>
void gpuFusedOps() {
  std::mt19937 rng(6);
  for (const ir::Shape& s : kGpuImageShapes)
    for (bool relu : {false, true})
      for (bool residual : {false, true}) {
        SCOPED_TRACE(ir::toString(act<T>(s)) + (relu ? " relu" : "") +
                     (residual ? " residual" : ""));
        const Dims d(s);
        const ir::TensorType c = f32({d.c});
        std::vector<ir::TensorType> in{act<T>(s), stats(d.c), c, c, c, c};
        if (residual) in.push_back(act<T>(s));
        SingleOp apply(ir::Op::kBatchNormApply, in,
                       {{"eps", kEps}, {"momentum", kMomentum}, {"relu", relu}}, {}, {}, {4, 5});
        fill(apply, rng, {{-2, 3}, {0, 0}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}, {-1, 1}});
        writeStats(data<T>(apply.in(0)), d, apply.in(1).f64());
        expectCudaMatchesCpu(apply, kTol<T>);

        SingleOp recompute(ir::Op::kBatchNormRecompute, {act<T>(s), stats(d.c), c, c},
                           {{"eps", kEps}, {"relu", relu}});
        for (size_t i : {0, 1, 2, 3})
          std::memcpy(recompute.in(i).view().data, apply.in(i).view().data,
                      static_cast<size_t>(apply.in(i).type().bytes()));
        expectCudaMatchesCpu(recompute, kTol<T>);

        std::vector<ir::TensorType> rin{act<T>(s), act<T>(s), c, c};
        if (relu) rin.push_back(act<T>(s));
        SingleOp reduce(ir::Op::kBatchNormBackwardReduce, rin);
        fill(reduce, rng, {{-1, 1}, {-2, 3}, {0, 0.5}, {0.5, 2}, {-1, 1}});
        expectCudaMatchesCpu(reduce, kTol<T>);

        std::vector<ir::TensorType> ain{act<T>(s), act<T>(s), c, c, c, sumsType(d.c),
                                        stats(d.c)};
        if (relu) ain.push_back(act<T>(s));
        SingleOp back(ir::Op::kBatchNormBackwardApply, ain, {{"residual", residual}});
        fill(back, rng, {{-1, 1}, {-2, 3}, {0.5, 1.5}, {0, 0.5}, {0.5, 2}, {0, 0}, {0, 0}, {-1, 1}});
        double* sums = back.in(5).f64();
        for (int64_t ch = 0; ch < d.c; ++ch) {
          sums[ch] = 0.25 * double(ch + 1);
          sums[d.c + ch] = -0.5 * double(ch);
        }
        writeStats(data<T>(back.in(1)), d, back.in(6).f64());
        expectCudaMatchesCpu(back, kTol<T>);
      }
}
TEST(CudaNormKernels, FusedOpsMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuFusedOps<float>();
}
TEST(CudaNormKernels, FusedOpsMatchCpuBf16) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuFusedOps<uint16_t>();
}

TEST(CudaNormKernels, FoldBatchNormMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (bool bias : {false, true}) {
    const ir::TensorType w = f32({16, 8, 3, 3}), c = f32({16});
    std::vector<ir::TensorType> in{w};
    if (bias) in.push_back(c);
    for (int i = 0; i < 4; ++i) in.push_back(c);
    SingleOp op(ir::Op::kFoldBatchNorm, in, {{"eps", kEps}});
    for (size_t i = 0; i < in.size(); ++i) op.in(i).fillUniform(rng, 0.5, 1.5);
    expectCudaMatchesCpu(op, 1e-6);
  }
}

/// launchChannelStats itself (conv2d_stats' statistics) against the host loop of its math,
/// which the CPU comparison above checks, and bit-identical on a second run.
template <typename T>
void gpuChannelStats() {
  std::mt19937 rng(8);
  for (const ir::Shape& s : kGpuImageShapes) {
    SCOPED_TRACE(ir::toString(act<T>(s)));
    const Dims d(s);
    Buffer x(act<T>(s));
    fillAct(x, rng, -2, 3);
    std::vector<double> want(3 * d.c);
    writeStats(data<T>(x), d, want.data());
    void* dx = nullptr;
    double* dst = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, static_cast<size_t>(x.type().bytes())), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dst), want.size() * sizeof(double)),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.view().data, static_cast<size_t>(x.type().bytes()),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    std::vector<std::vector<double>> got(2, std::vector<double>(want.size()));
    for (auto& g : got) {
      ASSERT_EQ(cudaMemset(dst, 0xFF, g.size() * sizeof(double)), cudaSuccess);
      backend::cuda::launchChannelStats(dx, kBf16<T>, d.n, d.c, d.hw, dst, nullptr);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(g.data(), dst, g.size() * sizeof(double), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    EXPECT_EQ(cudaFree(dx), cudaSuccess);
    EXPECT_EQ(cudaFree(dst), cudaSuccess);
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), want.size() * sizeof(double)), 0)
        << "two runs differ";
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_NEAR(got[0][k], want[k], 1e-12 * (1 + std::abs(want[k]))) << k;
  }
}
TEST(CudaNormKernels, ChannelStatsMatchHostAndRepeat) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuChannelStats<float>();
}
TEST(CudaNormKernels, ChannelStatsMatchHostAndRepeatBf16) {
  TANDEM_SKIP_WITHOUT_GPU();
  gpuChannelStats<uint16_t>();
}

/// Training batch norm twice on the same inputs: the same bits (no atomics, fixed trees).
TEST(CudaNormKernels, TrainingBatchNormIsBitIdenticalRunToRun) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  SingleOp op = batchNorm(f32({32, 64, 28, 28}), true);
  fill(op, rng, {{-2, 3}, {0.5, 1.5}, {-1, 1}, {-1, 1}, {0.5, 2}});
  std::vector<Buffer> a, b;
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    a.push_back(cloneBuffer(op.in(i)));
    b.push_back(cloneBuffer(op.in(i)));
  }
  CudaRun first = runOnCuda(op, a), second = runOnCuda(op, b);
  ASSERT_EQ(first.results.size(), second.results.size());
  for (size_t r = 0; r < first.results.size(); ++r)
    EXPECT_EQ(std::memcmp(first.results[r].view().data, second.results[r].view().data,
                          static_cast<size_t>(first.results[r].type().bytes())),
              0)
        << "result " << r;
}

}  // namespace
}  // namespace tandem::testing
