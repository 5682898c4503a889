// conv2d_relu_avg_pool and its filter gradient (fuse-conv-relu-pool's pair) against the ops
// they stand for: conv2d -> avg_pool2d{relu} (and relu's mask of the convolution's output),
// and avg_pool2d_backward{relu} -> conv2d_backward_filter. Where kTaps' loops run (AVX-512; no
// padding, no groups, stride 1 along the rows) the unfused side is kTaps too and the bits must be
// its bits, with zeros, NaN and infinities in x; elsewhere (and past 9 taps) the fused kernels'
// direct loops must agree with oneDNN's unfused kernels to rounding.

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/conv_choice.h"
#include "backend/cpu/dnnl_util.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

using backend::cpu::ConvStrategy;
using backend::cpu::KernelInit;

struct ConvPoolCase {
  std::string name;
  int64_t n, c, h, w, o, k;
  ir::Hw stride = 1, pad = 0;
  int64_t groups = 1;
  bool bias = true;

  /// Whether the fused kernels run kTaps' loops here (conv_pool_kernels.cc's tapsRun).
  bool taps() const {
    return backend::cpu::avx512Runs() && groups == 1 && c * k * k <= 9 && stride.w == 1 &&
           pad == ir::Hw(0) && w <= 32 && convW() <= 32;
  }
  int64_t convH() const { return (h + 2 * pad.h - k) / stride.h + 1; }
  int64_t convW() const { return (w + 2 * pad.w - k) / stride.w + 1; }
  ir::TensorType x() const { return f32({n, c, h, w}); }
  ir::TensorType filter() const { return f32({o, c / groups, k, k}); }
  ir::TensorType conv() const { return f32({n, o, convH(), convW()}); }
  ir::TensorType pooled() const { return f32({n, o, convH() / 2, convW() / 2}); }
  SingleOp::Attrs convAttrs() const {
    return {{"stride", stride.toAttr()}, {"pad", pad.toAttr()}, {"groups", groups}};
  }
  SingleOp::Attrs poolAttrs() const {
    return {{"kernel", int64_t{2}}, {"stride", int64_t{2}}, {"pad", int64_t{0}}, {"relu", true}};
  }
  std::vector<ir::TensorType> convOperands() const {
    std::vector<ir::TensorType> t{x(), filter()};
    if (bias) t.push_back(f32({o}));
    return t;
  }
};

const std::vector<ConvPoolCase>& cases() {
  static const std::vector<ConvPoolCase> all = {
      {.name = "lenet_conv1", .n = 4, .c = 1, .h = 28, .w = 28, .o = 20, .k = 3},
      {.name = "odd_output", .n = 3, .c = 1, .h = 12, .w = 11, .o = 5, .k = 3},  // 10x9
      {.name = "two_channels", .n = 2, .c = 2, .h = 10, .w = 10, .o = 3, .k = 2, .bias = false},
      {.name = "one_vector_rows", .n = 2, .c = 1, .h = 9, .w = 9, .o = 4, .k = 2},  // 8 columns
      {.name = "strided_rows", .n = 2, .c = 1, .h = 13, .w = 12, .o = 3, .k = 3, .stride = {2, 1}},
      // The direct loops: padding, groups, a stride along the rows.
      {.name = "padded", .n = 2, .c = 1, .h = 8, .w = 8, .o = 3, .k = 3, .pad = 1},
      {.name = "groups", .n = 2, .c = 2, .h = 8, .w = 8, .o = 4, .k = 3, .groups = 2},
      {.name = "strided", .n = 2, .c = 1, .h = 12, .w = 12, .o = 3, .k = 3, .stride = 2},
      {.name = "many_taps", .n = 2, .c = 2, .h = 9, .w = 9, .o = 3, .k = 3},  // 18 taps
  };
  return all;
}

std::vector<uint32_t> bits(Buffer& b) {
  std::vector<uint32_t> out(static_cast<size_t>(b.size()));
  std::memcpy(out.data(), b.f32(), out.size() * sizeof(float));
  return out;
}

double worstRelative(Buffer& a, Buffer& b) {
  double worst = 0;
  for (int64_t i = 0; i < b.size(); ++i)
    worst = std::max(worst, std::abs(double(a.f32()[i]) - double(b.f32()[i])) /
                                std::max(1.0, std::abs(double(b.f32()[i]))));
  return worst;
}

/// The unfused side's kernel: kTaps where the fused one runs its loops, else the table's.
template <auto kMake>
SingleOp::KernelFactory unfusedFactory(const ConvPoolCase& pc) {
  if (!pc.taps()) return nullptr;
  return [](const KernelInit& init) { return kMake(init, ConvStrategy::kTaps); };
}

void copy(Buffer& from, Buffer& to) {
  ASSERT_EQ(from.size(), to.size());
  std::memcpy(to.f32(), from.f32(), sizeof(float) * static_cast<size_t>(from.size()));
}

/// The two buffers equal bit for bit where `exact`, else to rounding.
void expectSame(Buffer& fused, Buffer& unfused, bool exact, const std::string& what) {
  if (exact) {
    EXPECT_EQ(bits(fused), bits(unfused)) << what;
  } else {
    EXPECT_LE(worstRelative(fused, unfused), 1e-5) << what;
  }
}

class ConvPoolKernelTest : public ::testing::TestWithParam<ConvPoolCase> {};

TEST_P(ConvPoolKernelTest, EqualTheUnfusedOps) {
  const ConvPoolCase& pc = GetParam();
  std::mt19937 rng(7);
  // Forward: conv2d then avg_pool2d{relu}, against the fused op.
  SingleOp conv(
      SingleOp::Spec{.op = ir::Op::kConv2d,
                     .operands = pc.convOperands(),
                     .attrs = pc.convAttrs(),
                     .factory = unfusedFactory<backend::cpu::makeConv2dKernelWithStrategy>(pc)});
  SingleOp fused(ir::Op::kConv2dReluAvgPool, pc.convOperands(), pc.convAttrs());
  ASSERT_TRUE(conv.built() && fused.built());
  for (size_t i = 0; i < conv.numInputs(); ++i) {
    conv.in(i).fillUniform(rng, -1, 1);
    copy(conv.in(i), fused.in(i));
  }
  if (pc.taps()) {  // the kernels' bits over zeros, NaN and infinities too
    float* x = fused.in(0).f32();
    const int64_t size = fused.in(0).size();
    x[0] = 0.0f, x[size / 3] = std::numeric_limits<float>::quiet_NaN();
    x[size / 2] = -std::numeric_limits<float>::infinity();
    x[size - 1] = std::numeric_limits<float>::infinity();
    copy(fused.in(0), conv.in(0));
  }
  conv.run();
  SingleOp pool(ir::Op::kAvgPool2d, {pc.conv()}, pc.poolAttrs());
  copy(conv.out(0), pool.in(0));
  pool.run();
  fused.out(0).fillUniform(rng, 1e6, 2e6);  // every element must be written
  fused.run();
  expectSame(fused.out(0), pool.out(0), pc.taps(), "forward");
  // relu's mask: bit j of a row's i32 where the convolution's output is > 0 or NaN.
  ASSERT_EQ(fused.out(1).size(), pc.n * pc.o * pc.convH());
  for (int64_t r = 0; r < fused.out(1).size(); ++r) {
    uint32_t bits = 0;
    for (int64_t j = 0; j < pc.convW(); ++j)
      if (!(conv.out(0).f32()[r * pc.convW() + j] <= 0.0f)) bits |= uint32_t{1} << j;
    ASSERT_EQ(static_cast<uint32_t>(fused.out(1).i32()[r]), bits) << "mask row " << r;
  }

  // Backward: avg_pool2d_backward{relu} of a pooled gradient over the convolution's
  // output, then conv2d_backward_filter, against the fused filter gradient over the mask.
  SingleOp pool_backward(ir::Op::kAvgPool2dBackward, {pc.pooled(), pc.conv()}, pc.poolAttrs());
  pool_backward.in(0).fillUniform(rng, -1, 1);
  copy(conv.out(0), pool_backward.in(1));
  pool_backward.run();
  SingleOp::Attrs filter_attrs = pc.convAttrs();
  filter_attrs.emplace_back("bias", pc.bias);
  SingleOp filter(SingleOp::Spec{
      .op = ir::Op::kConv2dBackwardFilter,
      .operands = {pc.conv(), pc.x(), pc.filter()},
      .attrs = filter_attrs,
      .factory = unfusedFactory<backend::cpu::makeConv2dBackwardFilterKernelWithStrategy>(pc)});
  copy(pool_backward.out(0), filter.in(0));
  copy(conv.in(0), filter.in(1));
  copy(conv.in(1), filter.in(2));
  filter.run();
  SingleOp fused_backward(ir::Op::kConv2dReluAvgPoolBackwardFilter,
                          {pc.pooled(), pc.x(), pc.filter(), fused.out(1).type()}, filter_attrs);
  ASSERT_TRUE(fused_backward.built());
  ASSERT_EQ(fused_backward.node().numResults(), pc.bias ? 2u : 1u);
  copy(pool_backward.in(0), fused_backward.in(0));
  copy(conv.in(0), fused_backward.in(1));
  copy(conv.in(1), fused_backward.in(2));
  std::memcpy(fused_backward.in(3).i32(), fused.out(1).i32(),
              sizeof(int32_t) * static_cast<size_t>(fused.out(1).size()));
  for (size_t r = 0; r < fused_backward.node().numResults(); ++r)
    fused_backward.out(r).fillUniform(rng, 1e6, 2e6);
  fused_backward.run();
  expectSame(fused_backward.out(0), filter.out(0), pc.taps(), "dw");
  if (pc.bias) expectSame(fused_backward.out(1), filter.out(1), pc.taps(), "db");
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvPoolKernelTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tandem::testing
