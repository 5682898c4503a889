// The batch norm kernels (norm_kernels.cc, fused_kernels.cc) with bf16 activations and
// f32 per-channel operands, each against the same node in f32 on the same inputs (the f32
// run's activations rounded to bf16, kernel_test_util.h's shareInputs). Both runs read the
// same values and compute in float and double in the same order, so the per-channel
// results (save_mean, save_invstd, dgamma, dbeta, the f64 sums) and the running
// statistics updated in place agree to float rounding, and an activation result differs
// only by its rounding to bf16: well inside expectBf16NearF32's 2e-2, which is checked too.
// Statistics inputs (count, sum, sum of squares) and the saved mean and 1/std are those of
// the data. conv2d_stats and conv2d_bias_act wrap the convolution and are tested with it.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/bf16.h"
#include "backend/cpu/kernels.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using Bf16 = backend::bf16;  // bf16(shape) is kernel_test_util's type maker
using ir::Op;

/// An activation result against f32: one rounding to bf16, at most half an ulp of its 8
/// significant bits (2^-8 relative), with a little room.
constexpr double kOneRounding = 4e-3;
/// Per-channel results and state: the same sums of the same values.
constexpr double kSameSums = 1e-6;
constexpr double kEps = 1e-5, kMomentum = 0.1;

/// Runs both nodes on the same operands and compares every result (bf16 ones within one
/// rounding, and within expectBf16NearF32's bound; the others as the same sums) and the
/// operands listed in `state`, which the kernels update in place.
void expectNearF32(SingleOp& ref, SingleOp& low, const std::vector<size_t>& state = {}) {
  shareInputs(ref, low);
  ref.run();
  low.run();
  ASSERT_EQ(ref.node().numResults(), low.node().numResults());
  for (size_t r = 0; r < ref.node().numResults(); ++r) {
    const bool act = low.out(r).type().dtype == ir::DType::kBF16;
    const double err = scaledError(low.out(r), ref.out(r));
    EXPECT_LE(err, act ? kOneRounding : kSameSums)
        << low.node().describe() << " result " << r << " against its f32 form";
    EXPECT_LE(err, 2e-2);  // expectBf16NearF32's bound
  }
  for (size_t i : state)
    EXPECT_LE(scaledError(low.in(i), ref.in(i)), kSameSums)
        << low.node().describe() << " operand " << i << " (updated in place) against f32";
}

/// Rounds an f32 buffer's values to bf16 ones, so that statistics taken from them are
/// those of the values the bf16 node reads.
void roundToBf16(Buffer& b) {
  for (int64_t i = 0; i < b.size(); ++i) b.f32()[i] = Bf16(b.f32()[i]);
}

/// Per-channel count, sum, sum of squares, mean and biased variance of an f32 [N,C,H,W]
/// or [N,C] buffer, in double.
struct Moments {
  int64_t c = 0;
  std::vector<double> count, sum, sumsq, mean, var;
};
Moments momentsOf(Buffer& x) {
  const ir::Shape& s = x.type().shape;
  const int64_t c = s[1], hw = s.size() == 4 ? s[2] * s[3] : 1;
  Moments m{c,
            std::vector<double>(c, 0.0),
            std::vector<double>(c, 0.0),
            std::vector<double>(c, 0.0),
            std::vector<double>(c, 0.0),
            std::vector<double>(c, 0.0)};
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t ch = (i / hw) % c;
    const double v = x.f32()[i];
    m.count[ch] += 1, m.sum[ch] += v, m.sumsq[ch] += v * v;
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    m.mean[ch] = m.sum[ch] / m.count[ch];
    for (int64_t i = ch * hw; i < x.size(); i += c * hw)
      for (int64_t p = 0; p < hw; ++p) {
        const double d = x.f32()[i + p] - m.mean[ch];
        m.var[ch] += d * d / m.count[ch];
      }
  }
  return m;
}

/// The statistics tensor f64[3,C] (count, sum, sum of squares) of the data.
void writeStats(const Moments& m, Buffer& stats) {
  for (int64_t ch = 0; ch < m.c; ++ch) {
    stats.f64()[ch] = m.count[ch];
    stats.f64()[m.c + ch] = m.sum[ch];
    stats.f64()[2 * m.c + ch] = m.sumsq[ch];
  }
}

/// save_mean and save_invstd as the training forward leaves them.
void writeSaved(const Moments& m, Buffer& mean, Buffer& invstd) {
  for (int64_t ch = 0; ch < m.c; ++ch) {
    mean.f32()[ch] = static_cast<float>(m.mean[ch]);
    invstd.f32()[ch] = static_cast<float>(1 / std::sqrt(m.var[ch] + kEps));
  }
}

/// relu's output: the buffer's values, negative ones zeroed.
void reluOf(Buffer& b) {
  for (int64_t i = 0; i < b.size(); ++i) b.f32()[i] = std::max(b.f32()[i], 0.0f);
}

using TypeMaker = ir::TensorType (*)(ir::Shape);
const ir::Shape kShapes[] = {{4, 16, 5, 5}, {3, 32, 7, 7}};
ir::TensorType stats(int64_t c) { return {ir::DType::kF64, {3, c}}; }
ir::TensorType sums(int64_t c) { return {ir::DType::kF64, {2, c}}; }

TEST(Bf16NormKernels, BatchNormTrainingMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(1);
  for (const ir::Shape& s : {kShapes[0], kShapes[1], ir::Shape{8, 16}}) {
    SCOPED_TRACE(ir::toString(f32(s)));
    auto node = [&](TypeMaker act) {
      const ir::TensorType ch = f32({s[1]});
      return SingleOp(Op::kBatchNorm, {act(s), ch, ch, ch, ch},
                      {{"training", true}, {"momentum", kMomentum}, {"eps", kEps}}, {}, {}, {3, 4});
    };
    SingleOp ref = node(f32), low = node(bf16);
    ref.in(0).fillUniform(rng, -2, 3);  // a mean away from zero
    ref.in(1).fillUniform(rng, 0.5, 1.5);
    ref.in(2).fillUniform(rng);
    ref.in(3).fillUniform(rng);
    ref.in(4).fillUniform(rng, 0.5, 2);
    expectNearF32(ref, low, {3, 4});
  }
}

TEST(Bf16NormKernels, BatchNormInferenceMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(2);
  for (const ir::Shape& s : {kShapes[0], kShapes[1], ir::Shape{8, 16}}) {
    SCOPED_TRACE(ir::toString(f32(s)));
    const ir::TensorType ch = f32({s[1]});
    const SingleOp::Attrs attrs = {{"training", false}, {"momentum", kMomentum}, {"eps", kEps}};
    SingleOp ref(Op::kBatchNorm, {f32(s), ch, ch, ch, ch}, attrs);
    SingleOp low(Op::kBatchNorm, {bf16(s), ch, ch, ch, ch}, attrs);
    ref.in(0).fillUniform(rng, -2, 3);
    ref.in(1).fillUniform(rng, 0.5, 1.5);
    ref.in(2).fillUniform(rng);
    ref.in(3).fillUniform(rng);
    ref.in(4).fillUniform(rng, 0.5, 2);
    expectNearF32(ref, low);
  }
}

TEST(Bf16NormKernels, BatchNormBackwardMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(3);
  for (const ir::Shape& s : {kShapes[0], kShapes[1], ir::Shape{8, 16}}) {
    SCOPED_TRACE(ir::toString(f32(s)));
    const ir::TensorType ch = f32({s[1]});
    SingleOp ref(Op::kBatchNormBackward, {f32(s), f32(s), ch, ch, ch}, {{"eps", kEps}});
    SingleOp low(Op::kBatchNormBackward, {bf16(s), bf16(s), ch, ch, ch}, {{"eps", kEps}});
    ref.in(0).fillUniform(rng);
    ref.in(1).fillUniform(rng, -2, 3);
    roundToBf16(ref.in(1));
    ref.in(2).fillUniform(rng, 0.5, 1.5);
    writeSaved(momentsOf(ref.in(1)), ref.in(3), ref.in(4));
    expectNearF32(ref, low);
  }
}

TEST(Bf16NormKernels, BatchNormApplyMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(4);
  for (const ir::Shape& s : kShapes)
    for (bool relu : {false, true})
      for (bool residual : {false, true}) {
        SCOPED_TRACE(ir::toString(f32(s)) + (relu ? " relu" : "") + (residual ? " residual" : ""));
        const int64_t c = s[1];
        auto node = [&](TypeMaker act) {
          std::vector<ir::TensorType> in{act(s), stats(c), f32({c}), f32({c}), f32({c}), f32({c})};
          if (residual) in.push_back(act(s));
          return SingleOp(Op::kBatchNormApply, in,
                          {{"eps", kEps}, {"momentum", kMomentum}, {"relu", relu}}, {}, {}, {4, 5});
        };
        SingleOp ref = node(f32), low = node(bf16);
        ref.in(0).fillUniform(rng, -2, 3);
        roundToBf16(ref.in(0));
        writeStats(momentsOf(ref.in(0)), ref.in(1));
        ref.in(2).fillUniform(rng, 0.5, 1.5);
        ref.in(3).fillUniform(rng);
        ref.in(4).fillUniform(rng);
        ref.in(5).fillUniform(rng, 0.5, 2);
        if (residual) ref.in(6).fillUniform(rng);
        expectNearF32(ref, low, {4, 5});
        if (residual) continue;
        // batch_norm_recompute gives the same bf16 output bit for bit.
        SingleOp recompute(Op::kBatchNormRecompute, {bf16(s), stats(c), f32({c}), f32({c})},
                           {{"eps", kEps}, {"relu", relu}});
        for (size_t i = 0; i < 4; ++i)
          std::memcpy(recompute.in(i).view().data, low.in(i).view().data,
                      static_cast<size_t>(low.in(i).type().bytes()));
        recompute.run();
        EXPECT_EQ(std::memcmp(recompute.out().view().data, low.out(0).view().data,
                              static_cast<size_t>(low.out(0).type().bytes())),
                  0);
      }
}

TEST(Bf16NormKernels, BatchNormRecomputeMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(5);
  for (const ir::Shape& s : kShapes)
    for (bool relu : {false, true}) {
      SCOPED_TRACE(ir::toString(f32(s)) + (relu ? " relu" : ""));
      const int64_t c = s[1];
      const SingleOp::Attrs attrs = {{"eps", kEps}, {"relu", relu}};
      SingleOp ref(Op::kBatchNormRecompute, {f32(s), stats(c), f32({c}), f32({c})}, attrs);
      SingleOp low(Op::kBatchNormRecompute, {bf16(s), stats(c), f32({c}), f32({c})}, attrs);
      ref.in(0).fillUniform(rng, -2, 3);
      roundToBf16(ref.in(0));
      writeStats(momentsOf(ref.in(0)), ref.in(1));
      ref.in(2).fillUniform(rng, 0.5, 1.5);
      ref.in(3).fillUniform(rng);
      expectNearF32(ref, low);
    }
}

TEST(Bf16NormKernels, BatchNormBackwardReduceMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(6);
  for (const ir::Shape& s : kShapes)
    for (bool relu : {false, true}) {
      SCOPED_TRACE(ir::toString(f32(s)) + (relu ? " relu" : ""));
      const ir::TensorType ch = f32({s[1]});
      std::vector<ir::TensorType> ref_in{f32(s), f32(s), ch, ch}, low_in{bf16(s), bf16(s), ch, ch};
      if (relu) ref_in.push_back(f32(s)), low_in.push_back(bf16(s));
      SingleOp ref(Op::kBatchNormBackwardReduce, ref_in), low(Op::kBatchNormBackwardReduce, low_in);
      ref.in(0).fillUniform(rng);
      ref.in(1).fillUniform(rng, -2, 3);
      roundToBf16(ref.in(1));
      writeSaved(momentsOf(ref.in(1)), ref.in(2), ref.in(3));
      if (relu) {
        ref.in(4).fillUniform(rng);
        reluOf(ref.in(4));
      }
      expectNearF32(ref, low);
    }
}

TEST(Bf16NormKernels, BatchNormBackwardApplyMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(7);
  for (const ir::Shape& s : kShapes)
    for (bool relu : {false, true})
      for (bool residual : {false, true}) {
        SCOPED_TRACE(ir::toString(f32(s)) + (relu ? " relu" : "") + (residual ? " residual" : ""));
        const int64_t c = s[1], hw = s[2] * s[3];
        auto node = [&](TypeMaker act) {
          std::vector<ir::TensorType> in{act(s),   act(s),  f32({c}), f32({c}),
                                         f32({c}), sums(c), stats(c)};
          if (relu) in.push_back(act(s));
          return SingleOp(Op::kBatchNormBackwardApply, in, {{"residual", residual}});
        };
        SingleOp ref = node(f32), low = node(bf16);
        for (size_t i : {0, 1}) {
          ref.in(i).fillUniform(rng, -2, 3);
          roundToBf16(ref.in(i));
        }
        ref.in(2).fillUniform(rng, 0.5, 1.5);
        if (relu) {
          ref.in(7).fillUniform(rng);
          reluOf(ref.in(7));
          roundToBf16(ref.in(7));
        }
        const Moments m = momentsOf(ref.in(1));
        writeSaved(m, ref.in(3), ref.in(4));
        writeStats(m, ref.in(6));
        // The backward sums of the data: sum dz, sum dz * (y - mean).
        double* sum = ref.in(5).f64();
        for (int64_t i = 0; i < ref.in(0).size(); ++i) {
          const int64_t ch = (i / hw) % c;
          const double dz = !relu || ref.in(7).f32()[i] > 0 ? ref.in(0).f32()[i] : 0.0;
          sum[ch] += dz, sum[c + ch] += dz * (ref.in(1).f32()[i] - ref.in(3).f32()[ch]);
        }
        expectNearF32(ref, low);
      }
}

}  // namespace
}  // namespace tandem::testing
