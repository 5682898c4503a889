// The bf16 kernels that oneDNN runs (convolutions, inner products) and the elementwise
// ones (relu, add, cast), each against the same node in f32 on the same inputs: relative
// error <= 2e-2, forward and backward. The convolutions and linear layers read f32
// master weights beside bf16 activations, as mixed precision emits them.

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/bf16.h"
#include "backend/cpu/dnnl_util.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using Bf16 = backend::bf16;  // bf16(shape) is kernel_test_util's type maker
using ir::Op;

/// One convolution geometry; the activations' dtype is chosen per case.
struct ConvCase {
  int64_t n, c, o, hw, k, stride, pad;
  int64_t groups = 1;
  ir::Shape x() const { return {n, c, hw, hw}; }
  ir::Shape w() const { return {o, c / groups, k, k}; }
  ir::Shape y() const {
    const int64_t e = (hw + 2 * pad - k) / stride + 1;
    return {n, o, e, e};
  }
  SingleOp::Attrs attrs() const { return {{"stride", stride}, {"pad", pad}, {"groups", groups}}; }
};

// Plain GEMM (1x1, one input channel), the blocked JIT kernel (3x3 from 8 channels), a
// strided one, and a shape where f32 would pick Winograd (bf16 falls back to direct).
const ConvCase kConvs[] = {{2, 1, 16, 9, 3, 1, 0},
                           {2, 16, 32, 8, 3, 1, 1},
                           {2, 32, 16, 9, 3, 2, 1},
                           {2, 32, 64, 6, 1, 1, 0},
                           {1, 64, 64, 16, 3, 1, 1},
                           // Grouped and depthwise (stride 1 and 2, a 5x5 with a channel
                           // multiplier of 2): the blocked JIT kernels in bf16 too.
                           {2, 32, 32, 8, 3, 1, 1, 4},
                           {2, 32, 32, 9, 3, 1, 1, 32},
                           {2, 16, 16, 9, 3, 2, 1, 16},
                           {1, 16, 32, 8, 5, 1, 2, 16}};

void fill(SingleOp& op, std::mt19937& rng) {
  for (size_t i = 0; i < op.node().numOperands(); ++i) op.in(i).fillUniform(rng);
}

TEST(Bf16Kernels, Conv2dForwardMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(1);
  for (const ConvCase& c : kConvs) {
    SingleOp ref(Op::kConv2d, {f32(c.x()), f32(c.w()), f32({c.o})}, c.attrs());
    SingleOp low(Op::kConv2d, {bf16(c.x()), f32(c.w()), f32({c.o})}, c.attrs());
    ASSERT_EQ(low.node().result()->type().dtype, ir::DType::kBF16);
    fill(ref, rng);
    expectBf16NearF32(ref, low);
  }
}

TEST(Bf16Kernels, Conv2dBackwardDataMatchesF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(2);
  for (const ConvCase& c : kConvs) {
    SingleOp ref(Op::kConv2dBackwardData, {f32(c.y()), f32(c.w()), f32(c.x())}, c.attrs());
    SingleOp low(Op::kConv2dBackwardData, {bf16(c.y()), f32(c.w()), bf16(c.x())}, c.attrs());
    fill(ref, rng);
    expectBf16NearF32(ref, low);
  }
}

TEST(Bf16Kernels, Conv2dBackwardFilterGivesF32GradientsNearF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(3);
  for (const ConvCase& c : kConvs) {
    SingleOp::Attrs attrs = c.attrs();
    attrs.emplace_back("bias", true);
    SingleOp ref(Op::kConv2dBackwardFilter, {f32(c.y()), f32(c.x()), f32(c.w())}, attrs);
    SingleOp low(Op::kConv2dBackwardFilter, {bf16(c.y()), bf16(c.x()), f32(c.w())}, attrs);
    // The master weights' gradients come out f32, straight from the primitive.
    ASSERT_EQ(low.node().result(0)->type().dtype, ir::DType::kF32);
    ASSERT_EQ(low.node().result(1)->type().dtype, ir::DType::kF32);
    fill(ref, rng);
    expectBf16NearF32(ref, low);
  }
}

TEST(Bf16Kernels, LinearMatchesF32ForwardAndBackward) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(4);
  const int64_t n = 32, in = 800, out = 128;
  {
    SingleOp ref(Op::kLinear, {f32({n, in}), f32({out, in}), f32({out})});
    SingleOp low(Op::kLinear, {bf16({n, in}), f32({out, in}), f32({out})});
    fill(ref, rng);
    expectBf16NearF32(ref, low);
  }
  {
    SingleOp ref(Op::kLinearBackwardData, {f32({n, out}), f32({out, in})});
    SingleOp low(Op::kLinearBackwardData, {bf16({n, out}), f32({out, in})});
    fill(ref, rng);
    expectBf16NearF32(ref, low);
  }
  {
    SingleOp ref(Op::kLinearBackwardWeight, {f32({n, out}), f32({n, in})}, {{"bias", true}});
    SingleOp low(Op::kLinearBackwardWeight, {bf16({n, out}), bf16({n, in})}, {{"bias", true}});
    fill(ref, rng);
    expectBf16NearF32(ref, low);
  }
}

TEST(Bf16Kernels, ReluAddAndReluBackwardMatchF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(5);
  // Literal types: f32(shape) on a local shape trips GCC 12's maybe-uninitialized false
  // positive in absl::InlinedVector's move.
  const ir::TensorType f{ir::DType::kF32, {2, 16, 5, 5}}, b{ir::DType::kBF16, {2, 16, 5, 5}};
  SingleOp relu_ref(Op::kRelu, {f}), relu_low(Op::kRelu, {b});
  fill(relu_ref, rng);
  expectBf16NearF32(relu_ref, relu_low, 0);  // exact: relu only selects
  SingleOp add_ref(Op::kAdd, {f, f}), add_low(Op::kAdd, {b, b});
  fill(add_ref, rng);
  expectBf16NearF32(add_ref, add_low, 1.0 / 128);  // one rounding of the sum
  SingleOp back_ref(Op::kReluBackward, {f, f});
  SingleOp back_low(Op::kReluBackward, {b, b});
  fill(back_ref, rng);
  expectBf16NearF32(back_ref, back_low, 0);
}

TEST(Bf16Kernels, CastRoundsToNearestEvenAndWidensExactly) {
  TANDEM_SKIP_WITHOUT_BF16();
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, 1.00390625f /* halfway: to even */,
                                     1.01171875f /* halfway: up */, 3.14159265f, -2.5e-3f,
                                     65504.0f, 1e30f, std::numeric_limits<float>::infinity()};
  const int64_t n = static_cast<int64_t>(values.size());
  SingleOp down(Op::kCast, {f32({n})}, {{"dtype", ir::EnumWord{"bf16"}}});
  for (int64_t i = 0; i < n; ++i) down.in(0).f32()[i] = values[size_t(i)];
  down.run();
  ASSERT_EQ(down.out().type().dtype, ir::DType::kBF16);
  EXPECT_EQ(down.out().bf16()[3].bits, 0x3f80);  // 1 + 2^-8 ties to the even 1.0
  EXPECT_EQ(down.out().bf16()[4].bits, 0x3f82);  // 1 + 3 * 2^-8 ties up to the even 1 + 2^-6
  SingleOp up(Op::kCast, {bf16({n})}, {{"dtype", ir::EnumWord{"f32"}}});
  for (int64_t i = 0; i < n; ++i) up.in(0).bf16()[i] = down.out().bf16()[i];
  up.run();
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[size_t(i)], back = up.out().f32()[i];
    EXPECT_EQ(back, static_cast<float>(Bf16(v))) << v;
    if (std::isfinite(v)) {
      EXPECT_LE(std::abs(back - v), std::abs(v) / 256) << v;  // 8 bits of mantissa
    }
  }
  // NaN stays NaN.
  SingleOp nan(Op::kCast, {f32({1})}, {{"dtype", ir::EnumWord{"bf16"}}});
  nan.in(0).f32()[0] = std::numeric_limits<float>::quiet_NaN();
  nan.run();
  EXPECT_TRUE(std::isnan(static_cast<float>(nan.out().bf16()[0])));
}

TEST(Bf16Kernels, ConvolutionsConvertMasterWeightsInTheirReorder) {
  TANDEM_SKIP_WITHOUT_BF16();
  // No separate pass over the weights: the f32 filter goes straight into the primitive's
  // bf16 layout (one reorder, which an f32 blocked convolution runs as well).
  const ConvCase c{2, 16, 32, 8, 3, 1, 1};
  SingleOp low(Op::kConv2d, {bf16(c.x()), f32(c.w())}, c.attrs());
  auto k = backend::cpu::makeConv2dKernelWithStrategy(
      {low.node(), low.ctx()}, backend::cpu::ConvStrategy::kBlocked);
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string& impls =
      static_cast<backend::cpu::ProgramKernel&>(**k).program().implementations();
  EXPECT_NE(impls.find("bf16"), std::string::npos) << impls;
}

}  // namespace
}  // namespace tandem::testing
