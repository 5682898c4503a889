// The losses of issue 42 on CUDA: softmax_cross_entropy over any class axis with
// ignore_index, class weights and a total (cross_entropy.cu's general kernels),
// target_weight_sum, and the pointwise losses (pointwise_loss.cu) against the CPU backend,
// their sums repeating their bits. Without a GPU: the per-element math the kernels share
// with the CPU is tested by tests/backend/loss_ops_refs_test.cc against PyTorch.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/host_device.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

const ir::TensorType kLossScalar{ir::DType::kF32, {}};

/// Labels in [0, classes) with every 5th an ignored one (ignore_index) and every 7th
/// padding (-1); dloss 0.75, the total 11.5, weights in [0.25, 2.25).
void fillCrossEntropy(SingleOp& op, std::mt19937& rng, int64_t classes, int64_t ignore,
                      bool weighted, bool backward) {
  op.in(0).fillUniform(rng, -4, 4);
  op.in(1).fillInts(rng, 0, static_cast<int>(classes) - 1);
  for (int64_t r = 0; r < op.in(1).size(); ++r) {
    if (r % 5 == 4) op.in(1).i32()[r] = static_cast<int32_t>(ignore);
    if (r % 7 == 3) op.in(1).i32()[r] = -1;
  }
  size_t next = backward ? 3 : 2;
  if (backward) op.in(2).f32()[0] = 0.75f;
  if (weighted) op.in(next++).fillUniform(rng, 0.25, 2.25);
  if (next < op.node().numOperands()) op.in(next).f32()[0] = 11.5f;
}

struct GeneralCase {
  std::vector<int64_t> shape;
  int64_t axis;
  bool weighted, total;
  double smoothing;
};
// Classes last ([B, T, V], one lane taking several), on axis 1 of a rank-4 tensor (classes
// strided), weights with and without smoothing, a total replacing the divisor.
const GeneralCase kGeneralCases[] = {{{4, 9, 50}, 2, false, true, 0.0},
                                     {{3, 6, 5, 4}, 1, true, true, 0.1},
                                     {{70, 33}, 1, true, false, 0.2},
                                     {{2, 40, 7}, 2, true, true, 0.0}};

SingleOp generalOp(const GeneralCase& c, bool backward) {
  const ir::Shape logits(c.shape.begin(), c.shape.end());
  ir::Shape labels = logits;
  labels.erase(labels.begin() + c.axis);
  std::vector<ir::TensorType> operands{{ir::DType::kF32, logits}, {ir::DType::kI32, labels}};
  if (backward) operands.push_back(kLossScalar);
  if (c.weighted) operands.push_back({ir::DType::kF32, {c.shape[static_cast<size_t>(c.axis)]}});
  if (c.total) operands.push_back(kLossScalar);
  return SingleOp(backward ? Op::kSoftmaxCrossEntropyBackward : Op::kSoftmaxCrossEntropy, operands,
                  {{"reduction", ir::EnumWord{"mean"}},
                   {"divisor", c.total ? int64_t{1} : int64_t{64}},
                   {"label_smoothing", c.smoothing},
                   {"axis", c.axis},
                   {"ignore_index", int64_t{1}},
                   {"weighted", c.weighted}});
}

TEST(CudaLossOptions, CrossEntropyOverAnyAxisWithWeightsAndTotalMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  for (const GeneralCase& c : kGeneralCases) {
    SCOPED_TRACE(absl::StrCat("axis ", c.axis, " weighted ", c.weighted, " total ", c.total));
    const int64_t classes = c.shape[static_cast<size_t>(c.axis)];
    SingleOp fwd = generalOp(c, false);
    fillCrossEntropy(fwd, rng, classes, 1, c.weighted, false);
    std::vector<Buffer> inputs;
    for (size_t i = 0; i < fwd.node().numOperands(); ++i) inputs.push_back(cloneBuffer(fwd.in(i)));
    CudaRun first = runOnCuda(fwd, inputs);
    CudaRun again = runOnCuda(fwd, inputs, /*runs=*/3);
    fwd.run();
    ASSERT_EQ(first.results.size(), 1u);
    const double want = fwd.out(0).f32()[0];
    EXPECT_NEAR(first.results[0].f32()[0], want, 1e-6 * std::max(1.0, std::abs(want)));
    EXPECT_EQ(cu::floatBits(first.results[0].f32()[0]), cu::floatBits(again.results[0].f32()[0]));

    SingleOp back = generalOp(c, true);
    fillCrossEntropy(back, rng, classes, 1, c.weighted, true);
    expectCudaMatchesCpu(back, 1e-6);
  }
}

TEST(CudaLossOptions, TargetWeightSumMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  for (bool weighted : {false, true}) {
    std::vector<ir::TensorType> operands{{ir::DType::kI32, {37, 45}}};
    if (weighted) operands.push_back({ir::DType::kF32, {9}});
    SingleOp op(Op::kTargetWeightSum, operands, {{"ignore_index", int64_t{2}}});
    op.in(0).fillInts(rng, -1, 8);
    if (weighted) op.in(1).fillUniform(rng, 0.25, 2.25);
    expectCudaMatchesCpu(op, 1e-7);
  }
}

TEST(CudaLossOptions, PointwiseLossesMatchCpuAndRepeatTheirBits) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  struct P {
    Op fwd, back;
    SingleOp::Attrs extra;
    bool pos_weight;
  };
  const P ops[] = {{Op::kMseLoss, Op::kMseLossBackward, {}, false},
                   {Op::kL1Loss, Op::kL1LossBackward, {}, false},
                   {Op::kSmoothL1Loss, Op::kSmoothL1LossBackward, {{"beta", 0.5}}, false},
                   {Op::kBceWithLogits, Op::kBceWithLogitsBackward, {}, false},
                   {Op::kBceWithLogits, Op::kBceWithLogitsBackward, {}, true}};
  const ir::TensorType x{ir::DType::kF32, {300, 17}};
  for (const P& p : ops) {
    SingleOp::Attrs attrs{{"reduction", ir::EnumWord{"mean"}}, {"divisor", int64_t{300 * 17}}};
    attrs.insert(attrs.end(), p.extra.begin(), p.extra.end());
    std::vector<ir::TensorType> operands{x, x};
    if (p.pos_weight) operands.push_back({ir::DType::kF32, {17}});
    SingleOp fwd(p.fwd, operands, attrs);
    fillFinite(fwd, rng, 4.0f);
    std::vector<Buffer> inputs;
    for (size_t i = 0; i < fwd.node().numOperands(); ++i) inputs.push_back(cloneBuffer(fwd.in(i)));
    CudaRun first = runOnCuda(fwd, inputs);
    CudaRun again = runOnCuda(fwd, inputs, /*runs=*/3);
    fwd.run();
    const double want = fwd.out(0).f32()[0];
    EXPECT_NEAR(first.results[0].f32()[0], want, 1e-6 * std::max(1.0, std::abs(want)))
        << fwd.node().describe();
    EXPECT_EQ(cu::floatBits(first.results[0].f32()[0]), cu::floatBits(again.results[0].f32()[0]));

    std::vector<ir::TensorType> back_operands{x, x, kLossScalar};
    if (p.pos_weight) back_operands.push_back({ir::DType::kF32, {17}});
    SingleOp back(p.back, back_operands, attrs);
    fillFinite(back, rng, 4.0f);
    back.in(2).f32()[0] = 0.75f;
    expectCudaMatchesCpu(back, 1e-6);
  }
}

}  // namespace
}  // namespace tandem::testing
