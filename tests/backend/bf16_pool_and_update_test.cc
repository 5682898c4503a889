// bf16 pooling and sgd_update, element by element: these kernels are the CPU backend's own
// loops, which read bf16 into float, do the f32 arithmetic and round once where they store.
// So on the same (bf16-representable) inputs every bf16 result is the f32 result rounded
// to bf16, bit for bit, and an update from a bf16 gradient is the f32 update. (The loops
// need no bf16 instructions, but the backend loads no bf16 node on a CPU without them.)

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ir::Op;

/// Every element of `low` (bf16) is ref's f32 element rounded to bf16 (NaN for NaN).
void expectRoundedF32(Buffer& low, Buffer& ref, const std::string& what) {
  ASSERT_EQ(low.type().dtype, ir::DType::kBF16) << what;
  ASSERT_EQ(low.size(), ref.size()) << what;
  for (int64_t k = 0; k < ref.size(); ++k) {
    const float r = ref.f32()[k];
    if (std::isnan(r)) {
      ASSERT_TRUE(std::isnan(float(low.bf16()[k]))) << what << ", element " << k;
      continue;
    }
    ASSERT_EQ(low.bf16()[k].bits, backend::bf16(r).bits)
        << what << ", element " << k << ": " << float(low.bf16()[k]) << " vs f32 " << r;
  }
}

/// A few NaNs, for the max kernels' NaN paths (the 2x2 loops redo a row holding one).
void sprinkleNan(Buffer& b, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> at(0, b.size() - 1);
  for (int i = 0; i < 3; ++i) b.f32()[at(rng)] = std::numeric_limits<float>::quiet_NaN();
}

struct WindowCase {
  Op forward, backward;
  int64_t kernel, stride, pad;
  bool nan;  // NaNs in x (max pooling only: they would spread through an average)
  SingleOp::Attrs attrs() const { return {{"kernel", kernel}, {"stride", stride}, {"pad", pad}}; }
  std::string name() const {
    return std::string(ir::opInfo(forward).name) + " k" + std::to_string(kernel) + " s" +
           std::to_string(stride) + " p" + std::to_string(pad) + (nan ? " with NaN" : "");
  }
};

// 2x2 stride 2 takes its own loops (odd H and W leave a row and a column past the last
// window); 3x3 stride 2 pad 1 and 3x3 stride 1 windows overlap, so their backward adds
// several contributions per input (in float, rounded once).
const WindowCase kWindows[] = {
    {Op::kMaxPool2d, Op::kMaxPool2dBackward, 2, 2, 0, false},
    {Op::kMaxPool2d, Op::kMaxPool2dBackward, 2, 2, 0, true},
    {Op::kMaxPool2d, Op::kMaxPool2dBackward, 3, 2, 1, false},
    {Op::kMaxPool2d, Op::kMaxPool2dBackward, 3, 2, 1, true},
    {Op::kAvgPool2d, Op::kAvgPool2dBackward, 2, 2, 0, false},
    {Op::kAvgPool2d, Op::kAvgPool2dBackward, 3, 2, 1, false},
    {Op::kAvgPool2d, Op::kAvgPool2dBackward, 3, 1, 1, false},
};

TEST(Bf16PoolKernels, WindowPoolingIsTheF32ResultRoundedOnce) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(31);
  const ir::Shape x_shape{2, 5, 11, 13};
  for (const WindowCase& c : kWindows) {
    SCOPED_TRACE(c.name());
    SingleOp ref(c.forward, {f32(x_shape)}, c.attrs());
    SingleOp low(c.forward, {bf16(x_shape)}, c.attrs());
    ref.in(0).fillUniform(rng);
    if (c.nan) sprinkleNan(ref.in(0), rng);
    expectBf16NearF32(ref, low);  // shares the inputs, runs both
    expectRoundedF32(low.out(), ref.out(), "forward");

    const ir::TensorType y = ref.node().result()->type();
    SingleOp back_ref(c.backward, {y, f32(x_shape)}, c.attrs());
    SingleOp back_low(c.backward, {ir::TensorType{ir::DType::kBF16, y.shape}, bf16(x_shape)},
                      c.attrs());
    back_ref.in(0).fillUniform(rng);
    back_ref.in(1).fillUniform(rng);
    if (c.nan) sprinkleNan(back_ref.in(1), rng);
    expectBf16NearF32(back_ref, back_low);
    expectRoundedF32(back_low.out(), back_ref.out(), "backward");
  }
}

TEST(Bf16PoolKernels, GlobalAvgPoolIsTheF32ResultRoundedOnce) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(32);
  const ir::Shape x_shape{3, 7, 5, 9};
  SingleOp ref(Op::kGlobalAvgPool, {f32(x_shape)});
  SingleOp low(Op::kGlobalAvgPool, {bf16(x_shape)});
  ref.in(0).fillUniform(rng);
  expectBf16NearF32(ref, low);
  expectRoundedF32(low.out(), ref.out(), "forward");

  SingleOp back_ref(Op::kGlobalAvgPoolBackward, {f32({3, 7, 1, 1}), f32(x_shape)});
  SingleOp back_low(Op::kGlobalAvgPoolBackward, {bf16({3, 7, 1, 1}), bf16(x_shape)});
  back_ref.in(0).fillUniform(rng);
  back_ref.in(1).fillUniform(rng);
  expectBf16NearF32(back_ref, back_low);
  expectRoundedF32(back_low.out(), back_ref.out(), "backward");
}

// With and without a momentum buffer; 1000 elements take the vectorized loops and a tail.
TEST(Bf16PoolKernels, SgdUpdateFromABf16GradientIsTheF32Update) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(33);
  constexpr int64_t kN = 1000;
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE("momentum " + std::to_string(momentum));
    const SingleOp::Attrs attrs{{"lr", 0.05}, {"momentum", momentum}, {"weight_decay", 5e-4}};
    auto update = [&](ir::DType g) {
      std::vector<ir::TensorType> operands{f32({kN}), ir::TensorType{g, {kN}}};
      std::vector<ir::Var> vars{ir::Var{"state0", f32({kN}), ir::VarRole::kParam, {}}};
      std::vector<size_t> state{0};
      if (momentum > 0) {
        operands.push_back(f32({kN}));
        vars.push_back(ir::Var{"state2", f32({kN}), ir::VarRole::kOptimizer, {}});
        state.push_back(2);
      }
      return SingleOp(Op::kSgdUpdate, operands, attrs, vars, {}, state);
    };
    SingleOp ref = update(ir::DType::kF32), low = update(ir::DType::kBF16);
    for (size_t i = 0; i < ref.node().numOperands(); ++i) ref.in(i).fillUniform(rng);
    shareInputs(ref, low);  // g rounded to bf16 in both
    const std::vector<float> w0(ref.in(0).f32(), ref.in(0).f32() + kN);
    for (int step = 0; step < 3; ++step) {  // the state carries over between steps
      ref.run();
      low.run();
    }
    std::vector<size_t> updated{0};
    if (momentum > 0) updated.push_back(2);
    for (size_t i : updated)
      EXPECT_EQ(std::memcmp(ref.in(i).f32(), low.in(i).f32(), kN * sizeof(float)), 0)
          << "operand " << i;
    EXPECT_NE(std::memcmp(w0.data(), low.in(0).f32(), kN * sizeof(float)), 0);  // it moved
  }
}

}  // namespace
}  // namespace tandem::testing
