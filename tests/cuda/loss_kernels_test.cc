// softmax_cross_entropy (label smoothing included), its backward op and accuracy on CUDA.
// Without a GPU: the per-row math the kernels run (cross_entropy_math.h, loss_math.h),
// compiled here; with one lane per row it is the CPU kernel to the bit, and with the
// kernels' 32 lanes and butterflies (emulated) within double rounding of it; the arg-max
// picks the CPU's class through ties and NaNs. With a GPU: every op against the CPU
// backend, the loss bit-identical between runs.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cross_entropy_math.h"
#include "backend/cuda/loss_math.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

constexpr int kLanes = 32;  // a warp
constexpr int kWarps = 32;  // the reduction block's warps (loss.cu)
const ir::TensorType kScalar{ir::DType::kF32, {}};

SingleOp::Attrs lossAttrs(const std::string& reduction, int64_t divisor, double smoothing) {
  return {
      {"reduction", ir::EnumWord{reduction}}, {"divisor", divisor}, {"label_smoothing", smoothing}};
}

/// Logits in [-4, 4), labels in [0, classes) with every 7th row padding (-1).
void fillLossInputs(SingleOp& op, std::mt19937& rng) {
  const int64_t rows = op.in(0).type().shape[0], classes = op.in(0).type().shape[1];
  op.in(0).fillUniform(rng, -4, 4);
  op.in(1).fillInts(rng, 0, static_cast<int>(classes) - 1);
  for (int64_t r = 3; r < rows; r += 7) op.in(1).i32()[r] = -1;
  if (op.node().numOperands() > 2) op.in(2).f32()[0] = 0.75f;
}

/// A butterfly over 32 lane values as __shfl_xor_sync runs it: lane l combines its value
/// with lane l ^ o's, for o = 16, 8, 4, 2, 1. Every lane must end with the same bits.
template <typename T, typename Combine>
T butterfly(std::vector<T> v, Combine combine) {
  for (int o = kLanes / 2; o > 0; o /= 2) {
    const std::vector<T> before = v;
    for (int l = 0; l < kLanes; ++l)
      v[static_cast<size_t>(l)] =
          combine(before[static_cast<size_t>(l)], before[static_cast<size_t>(l ^ o)]);
  }
  for (int l = 1; l < kLanes; ++l)
    EXPECT_EQ(std::memcmp(&v[0], &v[static_cast<size_t>(l)], sizeof(T)), 0) << "lane " << l;
  return v[0];
}

/// A row's log-sum-exp and the sum of its logits as the kernels compute them: `lanes`
/// lanes, butterflies when more than one.
struct RowStats {
  double lse, sum;
};
RowStats rowStats(const float* row, int64_t classes, int lanes) {
  if (lanes == 1) {
    const double max = backend::ceLaneMax(row, classes, 0, 1);
    const backend::CeLaneSums s = backend::ceLaneSums(row, classes, max, 0, 1);
    return {backend::ceLogSumExp(max, s.exp_sum), s.sum};
  }
  std::vector<double> v(kLanes), exp_sums(kLanes), sums(kLanes);
  for (int l = 0; l < kLanes; ++l)
    v[static_cast<size_t>(l)] = backend::ceLaneMax(row, classes, l, kLanes);
  const double max = butterfly(v, [](double a, double b) { return std::fmax(a, b); });
  for (int l = 0; l < kLanes; ++l) {
    const backend::CeLaneSums s = backend::ceLaneSums(row, classes, max, l, kLanes);
    exp_sums[static_cast<size_t>(l)] = s.exp_sum;
    sums[static_cast<size_t>(l)] = s.sum;
  }
  const auto add = [](double a, double b) { return a + b; };
  return {backend::ceLogSumExp(max, butterfly(exp_sums, add)), butterfly(sums, add)};
}

/// The loss as the forward kernel sums it: with one lane, the CPU's order (row after
/// row); with 32, warp w's rows w, w + 32, ... then the warps in order.
float hostLoss(SingleOp& op, double divisor, double smoothing, int lanes) {
  const float* logits = op.in(0).f32();
  const int32_t* labels = op.in(1).i32();
  const int64_t rows = op.in(0).type().shape[0], classes = op.in(0).type().shape[1];
  const int warps = lanes == 1 ? 1 : kWarps;
  double total = 0;
  for (int w = 0; w < warps; ++w) {
    double acc = 0;
    for (int64_t r = w; r < rows; r += warps) {
      if (labels[r] < 0) continue;
      const float* row = logits + r * classes;
      const RowStats st = rowStats(row, classes, lanes);
      acc += backend::ceRowLoss(row, classes, labels[r], st.lse, st.sum, smoothing);
    }
    total += acc;
  }
  return static_cast<float>(total / divisor);
}

/// dlogits as the backward kernel computes them.
std::vector<float> hostGrad(SingleOp& op, double divisor, double smoothing, int lanes) {
  const float* logits = op.in(0).f32();
  const int32_t* labels = op.in(1).i32();
  const int64_t rows = op.in(0).type().shape[0], classes = op.in(0).type().shape[1];
  const double scale = static_cast<double>(op.in(2).f32()[0]) / divisor;
  std::vector<float> d(static_cast<size_t>(rows * classes), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0) continue;
    const float* row = logits + r * classes;
    const double lse = rowStats(row, classes, lanes).lse;
    for (int64_t j = 0; j < classes; ++j)
      d[static_cast<size_t>(r * classes + j)] =
          backend::ceGrad(row[j], j == labels[r], lse, smoothing, classes, scale);
  }
  return d;
}

struct Case {
  int64_t rows, classes;
  std::string reduction;
  int64_t divisor;
  double smoothing;  // label_smoothing
};

// 1 class (the loss is 0), 10 (LeNet), 33 (one lane takes two), 1000 (ImageNet); more
// rows than the block has warps; a divisor that is the global batch of 4 devices; label
// smoothing off and on.
const Case kCases[] = {{37, 10, "mean", 37, 0.0},    {300, 10, "mean", 1200, 0.1},
                       {64, 33, "sum", 1, 0.3},      {70, 1000, "mean", 70, 0.0},
                       {70, 1000, "mean", 70, 0.05}, {5, 1, "mean", 5, 0.2}};

double divisorOf(const Case& c) { return c.reduction == "mean" ? double(c.divisor) : 1.0; }

TEST(CudaLossMath, OneLaneIsTheCpuKernelToTheBit) {
  std::mt19937 rng(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.classes) + " eps " +
                 std::to_string(c.smoothing));
    SingleOp fwd(Op::kSoftmaxCrossEntropy, {f32({c.rows, c.classes}), i32({c.rows})},
                 lossAttrs(c.reduction, c.divisor, c.smoothing));
    fillLossInputs(fwd, rng);
    fwd.run();
    const float loss = hostLoss(fwd, divisorOf(c), c.smoothing, 1);
    EXPECT_EQ(cu::floatBits(loss), cu::floatBits(fwd.out(0).f32()[0])) << loss;

    SingleOp back(Op::kSoftmaxCrossEntropyBackward,
                  {f32({c.rows, c.classes}), i32({c.rows}), kScalar},
                  lossAttrs(c.reduction, c.divisor, c.smoothing));
    fillLossInputs(back, rng);
    back.run();
    const std::vector<float> d = hostGrad(back, divisorOf(c), c.smoothing, 1);
    EXPECT_EQ(std::memcmp(d.data(), back.out(0).f32(), d.size() * sizeof(float)), 0);
  }
}

TEST(CudaLossMath, WarpLanesAreTheCpuKernelWithinDoubleRounding) {
  std::mt19937 rng(2);
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.classes) + " eps " +
                 std::to_string(c.smoothing));
    SingleOp fwd(Op::kSoftmaxCrossEntropy, {f32({c.rows, c.classes}), i32({c.rows})},
                 lossAttrs(c.reduction, c.divisor, c.smoothing));
    fillLossInputs(fwd, rng);
    fwd.run();
    const double want = fwd.out(0).f32()[0];
    EXPECT_NEAR(hostLoss(fwd, divisorOf(c), c.smoothing, kLanes), want,
                1e-6 * std::max(1.0, std::abs(want)));

    SingleOp back(Op::kSoftmaxCrossEntropyBackward,
                  {f32({c.rows, c.classes}), i32({c.rows}), kScalar},
                  lossAttrs(c.reduction, c.divisor, c.smoothing));
    fillLossInputs(back, rng);
    back.run();
    const std::vector<float> d = hostGrad(back, divisorOf(c), c.smoothing, kLanes);
    Buffer mine(back.out(0).type());
    std::memcpy(mine.f32(), d.data(), d.size() * sizeof(float));
    EXPECT_LE(scaledError(mine, back.out(0)), 1e-6);
  }
}

/// The class the accuracy kernel predicts for a row (32 lanes, butterfly).
int64_t hostPrediction(const float* row, int64_t classes) {
  std::vector<cu::ArgMax> v(kLanes);
  for (int l = 0; l < kLanes; ++l)
    v[static_cast<size_t>(l)] = cu::laneArgMax(row, classes, l, kLanes);
  return cu::predictedClass(
      butterfly(v, [](cu::ArgMax a, cu::ArgMax b) { return cu::betterOf(a, b); }));
}

/// Rows whose arg-max is tricky: ties (first wins), NaN in class 0 and NaN elsewhere (the
/// first NaN wins, as PyTorch's argmax), infinities, all equal, all NaN, -0 against +0.
std::vector<std::vector<float>> trickyRows(int64_t classes, std::mt19937& rng) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::uniform_real_distribution<float> d(-1, 1);
  auto random = [&] {
    std::vector<float> r(static_cast<size_t>(classes));
    for (float& v : r) v = d(rng);
    return r;
  };
  const size_t k = static_cast<size_t>(classes);
  std::vector<std::vector<float>> rows;
  rows.push_back(random());
  rows.push_back(std::vector<float>(k, 0.5f));  // all equal: class 0
  auto tie = random();
  tie[k - 1] = tie[k / 2] = 7.0f;  // the earlier of two maxima
  rows.push_back(tie);
  auto nan0 = random();
  nan0[0] = nan;
  nan0[k - 1] = 9.0f;
  rows.push_back(nan0);
  auto nan_late = random();
  nan_late[k / 2] = nan;
  rows.push_back(nan_late);
  auto infs = random();
  infs[k - 1] = inf;
  infs[0] = -inf;
  rows.push_back(infs);
  rows.push_back(std::vector<float>(k, -inf));  // all -inf: class 0
  rows.push_back(std::vector<float>(k, nan));   // all NaN: class 0
  auto zeros = std::vector<float>(k, -1.0f);
  zeros[k - 1] = 0.0f;
  zeros[k / 2] = -0.0f;  // -0 == +0: the earlier
  rows.push_back(zeros);
  return rows;
}

TEST(CudaLossMath, ArgMaxIsTheCpuClass) {
  std::mt19937 rng(3);
  for (int64_t classes : {int64_t{2}, int64_t{10}, int64_t{33}, int64_t{70}, int64_t{1000}}) {
    SCOPED_TRACE(std::to_string(classes) + " classes");
    for (const std::vector<float>& row : trickyRows(classes, rng)) {
      const int64_t predicted = hostPrediction(row.data(), classes);
      // The CPU's accuracy counts the row as correct exactly when its label is this class.
      for (int64_t label : {predicted, (predicted + 1) % classes}) {
        SingleOp acc(Op::kAccuracy, {f32({1, classes}), i32({1})});
        std::memcpy(acc.in(0).f32(), row.data(), row.size() * sizeof(float));
        acc.in(1).i32()[0] = static_cast<int32_t>(label);
        acc.run();
        EXPECT_EQ(acc.out(0).i32()[0], label == predicted ? 1 : 0)
            << "predicted " << predicted << ", label " << label;
        if (classes == 1) break;
      }
    }
  }
}

// ---- GPU ------------------------------------------------------------------------------

TEST(CudaLossKernels, ForwardMatchesCpuAndRepeatsItsBits) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.classes) + " eps " +
                 std::to_string(c.smoothing));
    SingleOp op(Op::kSoftmaxCrossEntropy, {f32({c.rows, c.classes}), i32({c.rows})},
                lossAttrs(c.reduction, c.divisor, c.smoothing));
    fillLossInputs(op, rng);
    std::vector<Buffer> inputs;
    for (size_t i = 0; i < 2; ++i) inputs.push_back(cloneBuffer(op.in(i)));
    CudaRun first = runOnCuda(op, inputs);
    CudaRun second = runOnCuda(op, inputs, /*runs=*/3);
    op.run();
    ASSERT_EQ(first.results.size(), 1u);
    ASSERT_EQ(second.results.size(), 1u);
    const double want = op.out(0).f32()[0];
    EXPECT_NEAR(first.results[0].f32()[0], want, 1e-6 * std::max(1.0, std::abs(want)));
    EXPECT_EQ(cu::floatBits(first.results[0].f32()[0]), cu::floatBits(second.results[0].f32()[0]));
  }
}

TEST(CudaLossKernels, BackwardMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.classes) + " eps " +
                 std::to_string(c.smoothing));
    SingleOp op(Op::kSoftmaxCrossEntropyBackward,
                {f32({c.rows, c.classes}), i32({c.rows}), kScalar},
                lossAttrs(c.reduction, c.divisor, c.smoothing));
    fillLossInputs(op, rng);
    std::vector<Buffer> inputs;
    for (size_t i = 0; i < 3; ++i) inputs.push_back(cloneBuffer(op.in(i)));
    CudaRun gpu = runOnCuda(op, inputs);
    op.run();
    ASSERT_EQ(gpu.results.size(), 1u);
    EXPECT_LE(scaledError(gpu.results[0], op.out(0)), 1e-6);
    // Padding rows: exactly zero (the poison 0xFF bytes overwritten).
    for (int64_t r = 3; r < c.rows; r += 7)
      for (int64_t j = 0; j < c.classes; ++j)
        ASSERT_EQ(cu::floatBits(gpu.results[0].f32()[r * c.classes + j]), 0u) << r << "," << j;
  }
}

TEST(CudaLossKernels, AccuracyCountsTheCpuRows) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (int64_t classes : {int64_t{10}, int64_t{33}, int64_t{1000}}) {
    SCOPED_TRACE(std::to_string(classes) + " classes");
    std::vector<std::vector<float>> rows = trickyRows(classes, rng);
    // Random rows after the tricky ones, more than the block has warps.
    const std::vector<std::vector<float>> more = trickyRows(classes, rng);
    for (int64_t i = 0; i < 100; ++i) {
      rows.push_back(more[0]);
      rows.back()[static_cast<size_t>(i % classes)] = 5.0f;
    }
    const int64_t n = static_cast<int64_t>(rows.size());
    SingleOp op(Op::kAccuracy, {f32({n, classes}), i32({n})});
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(op.in(0).f32() + r * classes, rows[static_cast<size_t>(r)].data(),
                  static_cast<size_t>(classes) * sizeof(float));
      // Correct for every other row (its predicted class), padding for every 5th.
      const int64_t p = hostPrediction(rows[static_cast<size_t>(r)].data(), classes);
      op.in(1).i32()[r] =
          r % 5 == 4 ? -1 : static_cast<int32_t>(r % 2 == 0 ? p : (p + 1) % classes);
    }
    std::vector<Buffer> inputs;
    for (size_t i = 0; i < 2; ++i) inputs.push_back(cloneBuffer(op.in(i)));
    CudaRun gpu = runOnCuda(op, inputs);
    op.run();
    ASSERT_EQ(gpu.results.size(), 1u);
    EXPECT_EQ(gpu.results[0].i32()[0], op.out(0).i32()[0]);
    EXPECT_GT(op.out(0).i32()[0], 0);
  }
}

}  // namespace
}  // namespace tandem::testing
