// Pooling and sgd_update with bf16 operands (mixed precision): each pool op, forward and
// backward, against the same op in f32 on the same inputs; the update reading a bf16
// gradient (all-reduced in bf16) against the f32 update of the same values.

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ir::Op;

struct PoolCase {
  Op forward, backward;
  int64_t kernel, stride, pad;
  SingleOp::Attrs attrs() const {
    return {{"kernel", kernel}, {"stride", stride}, {"pad", pad}};
  }
};

// The 2x2 stride-2 windows have loops of their own; 3x3 stride-2 padded windows overlap,
// so their backward sums several contributions per input (in float, rounded once).
const PoolCase kPools[] = {{Op::kMaxPool2d, Op::kMaxPool2dBackward, 2, 2, 0},
                           {Op::kMaxPool2d, Op::kMaxPool2dBackward, 3, 2, 1},
                           {Op::kAvgPool2d, Op::kAvgPool2dBackward, 2, 2, 0},
                           {Op::kAvgPool2d, Op::kAvgPool2dBackward, 3, 2, 1}};

TEST(Bf16Kernels, WindowPoolingMatchesF32ForwardAndBackward) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(21);
  for (const PoolCase& c : kPools) {
    SCOPED_TRACE(std::string(ir::opInfo(c.forward).name) + " k" + std::to_string(c.kernel));
    SingleOp ref(c.forward, {f32({2, 16, 9, 9})}, c.attrs());
    SingleOp low(c.forward, {bf16({2, 16, 9, 9})}, c.attrs());
    ref.in(0).fillUniform(rng);
    expectBf16NearF32(ref, low, 1.0 / 128);  // the one rounding of the stored result
    // Backward: dy of the forward output's shape, x the forward input.
    const ir::TensorType yt = ref.node().result()->type();
    SingleOp back_ref(c.backward, {yt, f32({2, 16, 9, 9})}, c.attrs());
    SingleOp back_low(c.backward, {ir::TensorType{ir::DType::kBF16, yt.shape}, bf16({2, 16, 9, 9})},
                      c.attrs());
    back_ref.in(0).fillUniform(rng);
    back_ref.in(1).fillUniform(rng);
    expectBf16NearF32(back_ref, back_low, 1.0 / 128);
  }
}

TEST(Bf16Kernels, GlobalAvgPoolMatchesF32ForwardAndBackward) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(22);
  SingleOp ref(Op::kGlobalAvgPool, {f32({4, 32, 7, 7})});
  SingleOp low(Op::kGlobalAvgPool, {bf16({4, 32, 7, 7})});
  ref.in(0).fillUniform(rng);
  expectBf16NearF32(ref, low, 1.0 / 128);
  SingleOp back_ref(Op::kGlobalAvgPoolBackward, {f32({4, 32, 1, 1}), f32({4, 32, 7, 7})});
  SingleOp back_low(Op::kGlobalAvgPoolBackward, {bf16({4, 32, 1, 1}), bf16({4, 32, 7, 7})});
  back_ref.in(0).fillUniform(rng);
  expectBf16NearF32(back_ref, back_low, 1.0 / 128);
}

TEST(Bf16Kernels, SgdUpdateReadsABf16GradientAsItsFloatValue) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(23);
  const SingleOp::Attrs attrs{{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 1e-4}};
  auto update = [&](ir::DType g) {
    return SingleOp(Op::kSgdUpdate,
                    {f32({257}), ir::TensorType{g, {257}}, f32({257})}, attrs,
                    {ir::Var{"state0", f32({257}), ir::VarRole::kParam, {}},
                     ir::Var{"state2", f32({257}), ir::VarRole::kOptimizer, {}}},
                    {}, {0, 2});
  };
  SingleOp ref = update(ir::DType::kF32), low = update(ir::DType::kBF16);
  for (size_t i : {0, 1, 2}) ref.in(i).fillUniform(rng);
  shareInputs(ref, low);  // the f32 gradient takes the bf16 one's values
  ref.run();
  low.run();
  // w and m, updated in place, come out bit for bit the same.
  for (size_t i : {0, 2})
    EXPECT_EQ(std::memcmp(ref.in(i).f32(), low.in(i).f32(), 257 * sizeof(float)), 0) << i;
}

}  // namespace
}  // namespace tandem::testing
