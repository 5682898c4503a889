// The elementwise family on CUDA (constant, initialize, assign, relu, relu_backward,
// sigmoid, gelu, gelu_tanh, tanh and their backward ops (within ulps: the CPU's exp, erf
// and tanh are oneDNN's), add,
// cast, flatten, flatten_backward, global_avg_pool and its backward). Without a GPU: the
// per-element math the kernels run (elementwise_math.h), compiled here, against the CPU
// kernels bit for bit, special values included. With a GPU: every op against the CPU
// backend, bit for bit (a NaN matches any NaN: the hardware's payloads differ), at sizes
// with a tail after the 16-byte packs, from unaligned pointers and in place.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/elementwise_launch.h"
#include "backend/cuda/elementwise_math.h"
#include "backend/initializers.h"
#include "backend/unary_math.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

// Values whose handling differs between careless implementations: signed zeros,
// infinities, NaN, subnormals, the largest float, and bf16 rounding ties (1 + 2^-8 lies
// halfway between two bf16 values, 1 + 3 * 2^-8 too, one rounding down, one up).
const float kSpecials[] = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           1e-40f,
                           -1e-40f,
                           std::numeric_limits<float>::max(),
                           1.00390625f,
                           1.01171875f,
                           -1.00390625f};

/// Random values in [-2, 2) (ints in [-1000, 1000]), the specials first.
void fill(Buffer& b, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::uniform_int_distribution<int> di(-1000, 1000);
  for (int64_t i = 0; i < b.size(); ++i) {
    const size_t s = static_cast<size_t>(i);
    const float v = s < std::size(kSpecials) ? kSpecials[s] : d(rng);
    switch (b.type().dtype) {
      case ir::DType::kBF16:
        b.bf16()[i] = v;
        break;
      case ir::DType::kI32:
        b.i32()[i] = di(rng);
        break;
      default:
        b.f32()[i] = v;
    }
  }
}

void fillAll(SingleOp& op, std::mt19937& rng) {
  for (size_t i = 0; i < op.node().numOperands(); ++i) fill(op.in(i), rng);
}

/// bf16 storage as the CUDA math reads it.
uint16_t* bits16(Buffer& b) { return reinterpret_cast<uint16_t*>(b.bf16()); }

/// Element i of two buffers of one type: the same bits, or both NaN.
bool sameElement(Buffer& a, Buffer& b, int64_t i) {
  const size_t w = static_cast<size_t>(ir::dtypeBytes(a.type().dtype));
  const char* pa = static_cast<const char*>(a.view().data) + static_cast<size_t>(i) * w;
  const char* pb = static_cast<const char*>(b.view().data) + static_cast<size_t>(i) * w;
  if (std::memcmp(pa, pb, w) == 0) return true;
  return a.type().dtype != ir::DType::kI32 && std::isnan(a.at(i)) && std::isnan(b.at(i));
}

/// `got` holds `want`'s bits (NaN for NaN).
void expectSameBits(Buffer& got, Buffer& want, const std::string& what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  for (int64_t i = 0; i < want.size(); ++i)
    if (!sameElement(got, want, i)) {
      ADD_FAILURE() << what << ": element " << i << " is " << got.at(i) << ", the CPU's "
                    << want.at(i) << " (of " << want.size() << ")";
      return;
    }
}

/// Runs `op` on cuda:0 and on the CPU from the same inputs; every result and operand
/// the same bits.
void expectCudaBitsMatchCpu(SingleOp& op, backend::DeviceOptions options = {}) {
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < op.node().numOperands(); ++i) inputs.push_back(cloneBuffer(op.in(i)));
  CudaRun gpu = runOnCuda(op, inputs, 1, options);
  op.run();
  ASSERT_EQ(gpu.results.size(), op.node().numResults());
  for (size_t r = 0; r < gpu.results.size(); ++r)
    expectSameBits(gpu.results[r], op.out(r),
                   op.node().describe() + " result " + std::to_string(r));
  for (size_t i = 0; i < gpu.operands.size(); ++i)
    expectSameBits(gpu.operands[i], op.in(i),
                   op.node().describe() + " operand " + std::to_string(i));
}

// ---- the math, on the host -------------------------------------------------------------

/// Runs `op` on the CPU, and `math(i)` into a copy of its result 0 for every element;
/// expects the same bits.
template <typename Math>
void expectMathMatchesCpu(SingleOp& op, Math math) {
  op.run();
  Buffer mine(op.out(0).type());
  for (int64_t i = 0; i < mine.size(); ++i) math(mine, i);
  expectSameBits(mine, op.out(0), op.node().describe() + " (host-compiled CUDA math)");
}

TEST(CudaElementwiseMath, ReluIsTheCpuKernel) {
  std::mt19937 rng(1);
  SingleOp f(Op::kRelu, {f32({97})});
  fillAll(f, rng);
  expectMathMatchesCpu(f, [&](Buffer& y, int64_t i) {
    cu::store(y.f32(), i, backend::reluValue(cu::load(f.in(0).f32(), i)));
  });
  SingleOp h(Op::kRelu, {bf16({97})});
  fillAll(h, rng);
  expectMathMatchesCpu(h, [&](Buffer& y, int64_t i) {
    cu::store(bits16(y), i, backend::reluValue(cu::load(bits16(h.in(0)), i)));
  });
  // PyTorch's clamp_min, as the CPU's: -0 stays -0, NaN stays NaN.
  EXPECT_EQ(cu::floatBits(backend::reluValue(-0.0f)), 0x80000000u);
  EXPECT_TRUE(std::isnan(backend::reluValue(std::numeric_limits<float>::quiet_NaN())));
}

TEST(CudaElementwiseMath, ReluBackwardIsTheCpuKernel) {
  std::mt19937 rng(2);
  SingleOp f(Op::kReluBackward, {f32({97}), f32({97})});
  fillAll(f, rng);
  expectMathMatchesCpu(f, [&](Buffer& dx, int64_t i) {
    cu::store(dx.f32(), i,
              backend::reluBackwardValue(cu::load(f.in(0).f32(), i), cu::load(f.in(1).f32(), i)));
  });
  SingleOp h(Op::kReluBackward, {bf16({97}), bf16({97})});
  fillAll(h, rng);
  expectMathMatchesCpu(h, [&](Buffer& dx, int64_t i) {
    cu::store(
        bits16(dx), i,
        backend::reluBackwardValue(cu::load(bits16(h.in(0)), i), cu::load(bits16(h.in(1)), i)));
  });
}

// sigmoid: the CPU kernel is oneDNN's logistic (its own vectorized exp), the CUDA one
// expf, so they agree to a few f32 ulps, not to the bit; the specials (infinities, NaN,
// the largest float) must still come out the same.
TEST(CudaElementwiseMath, SigmoidIsTheCpuKernelWithinUlps) {
  std::mt19937 rng(4);
  SingleOp f(Op::kSigmoid, {f32({97})});
  fillAll(f, rng);
  f.run();
  for (int64_t i = 0; i < f.out(0).size(); ++i) {
    const float x = f.in(0).f32()[i], cpu = f.out(0).f32()[i];
    const float mine = backend::SigmoidMath::forward(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(mine) && std::isnan(cpu)) << "x = " << x;
      continue;
    }
    if (std::isinf(x)) {
      EXPECT_EQ(mine, cpu) << "x = " << x;
    }
    EXPECT_NEAR(mine, cpu, 4 * std::numeric_limits<float>::epsilon()) << "x = " << x;
  }
  SingleOp b(Op::kSigmoidBackward, {f32({97}), f32({97})});
  fillAll(b, rng);
  b.run();
  for (int64_t i = 0; i < b.out(0).size(); ++i) {
    const float dy = b.in(0).f32()[i], y = b.in(1).f32()[i], cpu = b.out(0).f32()[i];
    const float mine = backend::SigmoidMath::backward(dy, y);
    if (std::isnan(cpu)) {
      EXPECT_TRUE(std::isnan(mine)) << "dy = " << dy << ", y = " << y;
      continue;
    }
    if (std::isinf(cpu)) {
      EXPECT_EQ(mine, cpu) << "dy = " << dy << ", y = " << y;
      continue;
    }
    EXPECT_NEAR(mine, cpu,
                4 * std::numeric_limits<float>::epsilon() * std::max(1.0f, std::abs(cpu)))
        << "dy = " << dy << ", y = " << y;
  }
}

// gelu, gelu_tanh and tanh: the CPU kernels are oneDNN's eltwise primitives (jit
// polynomials for erf, tanh and exp), the CUDA math libdevice's erff/tanhf/expf, so they
// agree within ulps, not to the bit: 8 f32 ulps of max(1, |cpu|). Finite values
// over the range where they bend ([-8, 8]), plus NaN, which must stay NaN.
template <typename Math>
void expectUnaryMathNearCpu(Op op, Op backward, bool backward_reads_output) {
  SCOPED_TRACE(std::string(ir::opInfo(op).name));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-8.0f, 8.0f);
  const int64_t n = 301;
  auto near = [](float mine, float cpu) {
    if (std::isnan(cpu)) return std::isnan(mine);
    return std::abs(mine - cpu) <=
           8 * std::numeric_limits<float>::epsilon() * std::max(1.0f, std::abs(cpu));
  };
  SingleOp f(op, {f32({n})});
  for (int64_t i = 0; i < n; ++i) f.in(0).f32()[i] = d(rng);
  f.in(0).f32()[0] = std::numeric_limits<float>::quiet_NaN();
  f.in(0).f32()[1] = 0.0f;
  f.run();
  for (int64_t i = 0; i < n; ++i) {
    const float x = f.in(0).f32()[i];
    EXPECT_TRUE(near(Math::forward(x), f.out(0).f32()[i]))
        << "x = " << x << ": " << Math::forward(x) << " vs " << f.out(0).f32()[i];
  }
  SingleOp b(backward, {f32({n}), f32({n})});
  for (int64_t i = 0; i < n; ++i) {
    b.in(0).f32()[i] = d(rng) / 8;
    b.in(1).f32()[i] = backward_reads_output ? f.out(0).f32()[i] : f.in(0).f32()[i];
  }
  b.run();
  for (int64_t i = 0; i < n; ++i) {
    const float dy = b.in(0).f32()[i], v = b.in(1).f32()[i];
    EXPECT_TRUE(near(Math::backward(dy, v), b.out(0).f32()[i]))
        << "dy = " << dy << ", v = " << v << ": " << Math::backward(dy, v) << " vs "
        << b.out(0).f32()[i];
  }
}

TEST(CudaElementwiseMath, GeluGeluTanhAndTanhAreTheCpuKernelsWithinUlps) {
  expectUnaryMathNearCpu<backend::GeluMath>(Op::kGelu, Op::kGeluBackward, false);
  expectUnaryMathNearCpu<backend::GeluTanhMath>(Op::kGeluTanh, Op::kGeluTanhBackward, false);
  expectUnaryMathNearCpu<backend::TanhMath>(Op::kTanh, Op::kTanhBackward, true);
}

TEST(CudaElementwiseMath, AddIsTheCpuKernel) {
  std::mt19937 rng(3);
  SingleOp f(Op::kAdd, {f32({97}), f32({97})});
  fillAll(f, rng);
  expectMathMatchesCpu(f, [&](Buffer& c, int64_t i) {
    cu::store(c.f32(), i, cu::addValue(cu::load(f.in(0).f32(), i), cu::load(f.in(1).f32(), i)));
  });
  // bf16: added in float, rounded once (not two bf16 roundings).
  SingleOp h(Op::kAdd, {bf16({97}), bf16({97})});
  fillAll(h, rng);
  expectMathMatchesCpu(h, [&](Buffer& c, int64_t i) {
    cu::store(bits16(c), i,
              cu::addValue(cu::load(bits16(h.in(0)), i), cu::load(bits16(h.in(1)), i)));
  });
  SingleOp n(Op::kAdd, {i32({97}), i32({97})});
  fillAll(n, rng);
  expectMathMatchesCpu(n, [&](Buffer& c, int64_t i) {
    c.i32()[i] = cu::addValue(n.in(0).i32()[i], n.in(1).i32()[i]);
  });
}

TEST(CudaElementwiseMath, CastsAreTheCpuKernels) {
  std::mt19937 rng(4);
  SingleOp down(Op::kCast, {f32({97})}, {{"dtype", ir::EnumWord{"bf16"}}});
  fillAll(down, rng);
  expectMathMatchesCpu(
      down, [&](Buffer& y, int64_t i) { bits16(y)[i] = cu::floatToBf16(down.in(0).f32()[i]); });
  SingleOp up(Op::kCast, {bf16({97})}, {{"dtype", ir::EnumWord{"f32"}}});
  fillAll(up, rng);
  expectMathMatchesCpu(
      up, [&](Buffer& y, int64_t i) { y.f32()[i] = cu::bf16ToFloat(bits16(up.in(0))[i]); });
}

TEST(CudaElementwiseMath, GlobalAvgPoolIsTheCpuKernel) {
  std::mt19937 rng(5);
  const ir::Shape x_shape{3, 5, 7, 7};
  const int64_t planes = 15, hw = 49;
  const float scale = cu::globalPoolScale(hw);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    SingleOp fwd(Op::kGlobalAvgPool, {ir::TensorType{t, x_shape}});
    fill(fwd.in(0), rng);
    SingleOp back(Op::kGlobalAvgPoolBackward,
                  {ir::TensorType{t, {3, 5, 1, 1}}, ir::TensorType{t, x_shape}});
    fillAll(back, rng);
    if (t == ir::DType::kF32) {
      expectMathMatchesCpu(fwd, [&](Buffer& y, int64_t p) {
        cu::store(y.f32(), p, cu::planeMean(fwd.in(0).f32(), p, hw, scale));
      });
      expectMathMatchesCpu(back, [&](Buffer& dx, int64_t i) {
        cu::store(dx.f32(), i, cu::globalPoolGrad(back.in(0).f32(), i, hw, scale));
      });
    } else {
      expectMathMatchesCpu(fwd, [&](Buffer& y, int64_t p) {
        cu::store(bits16(y), p, cu::planeMean(bits16(fwd.in(0)), p, hw, scale));
      });
      expectMathMatchesCpu(back, [&](Buffer& dx, int64_t i) {
        cu::store(bits16(dx), i, cu::globalPoolGrad(bits16(back.in(0)), i, hw, scale));
      });
    }
    EXPECT_EQ(fwd.out(0).size(), planes);
  }
}

// ---- GPU ------------------------------------------------------------------------------

// 3*5*7*11 = 1155 elements: 288 packs of 4 (or 144 of 8) and a tail of 3.
const ir::Shape kOdd{3, 5, 7, 11};

TEST(CudaElementwiseKernels, ReluAndBackwardMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    const ir::TensorType type{t, kOdd};
    SingleOp relu(Op::kRelu, {type});
    fillAll(relu, rng);
    expectCudaBitsMatchCpu(relu);
    SingleOp back(Op::kReluBackward, {type, type});
    fillAll(back, rng);
    expectCudaBitsMatchCpu(back);
  }
}

TEST(CudaElementwiseKernels, SigmoidAndBackwardMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    const ir::TensorType type{t, kOdd};
    SingleOp sigmoid(Op::kSigmoid, {type});
    fillFinite(sigmoid, rng);
    expectCudaMatchesCpu(sigmoid, t == ir::DType::kBF16 ? 8e-3 : 1e-6);
    SingleOp back(Op::kSigmoidBackward, {type, type});
    fillFinite(back, rng);
    expectCudaMatchesCpu(back, t == ir::DType::kBF16 ? 8e-3 : 1e-6);
  }
}

// The unary ops whose math is transcendental: libdevice's erff, tanhf, expf, logf, log1pf
// and sqrtf against oneDNN's polynomials (gelu, tanh) or the host's libm (the ONNX ops of
// issue 44), within a few ulps.
TEST(CudaElementwiseKernels, TranscendentalUnaryOpsMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const Op ops[][2] = {{Op::kGelu, Op::kGeluBackward},
                       {Op::kGeluTanh, Op::kGeluTanhBackward},
                       {Op::kTanh, Op::kTanhBackward},
                       {Op::kSilu, Op::kSiluBackward},
                       {Op::kSoftplus, Op::kSoftplusBackward},
                       {Op::kExp, Op::kExpBackward},
                       {Op::kLog, Op::kLogBackward},
                       {Op::kSqrt, Op::kSqrtBackward},
                       {Op::kReciprocal, Op::kReciprocalBackward},
                       {Op::kErf, Op::kErfBackward}};
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    for (const auto& [op, backward] : ops) {
      SCOPED_TRACE(std::string(ir::dtypeName(t)) + " " + std::string(ir::opInfo(op).name));
      const ir::TensorType type{t, kOdd};
      SingleOp f(op, {type});
      fillFinite(f, rng);
      // libdevice's erff/tanhf against oneDNN's polynomials (the host test's bound, with room).
      expectCudaMatchesCpu(f, t == ir::DType::kBF16 ? 8e-3 : 1e-5);
      SingleOp b(backward, {type, type});
      fillFinite(b, rng);
      expectCudaMatchesCpu(b, t == ir::DType::kBF16 ? 8e-3 : 1e-5);
    }
  }
}

// MobileNet's activations and the steps and abs of ONNX's models (issue 44): no
// transcendental math, the same Math structs on both sides: the CPU's bits, specials
// included.
TEST(CudaElementwiseKernels, ExactUnaryOpsMatchCpuBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  const Op ops[][2] = {{Op::kHardswish, Op::kHardswishBackward},
                       {Op::kHardsigmoid, Op::kHardsigmoidBackward},
                       {Op::kRelu6, Op::kRelu6Backward},
                       {Op::kAbs, Op::kAbsBackward},
                       {Op::kSign, Op::kSignBackward},
                       {Op::kFloor, Op::kFloorBackward},
                       {Op::kCeil, Op::kCeilBackward}};
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    for (const auto& [op, backward] : ops) {
      SCOPED_TRACE(std::string(ir::dtypeName(t)) + " " + std::string(ir::opInfo(op).name));
      const ir::TensorType type{t, kOdd};
      SingleOp f(op, {type});
      fillAll(f, rng);
      expectCudaBitsMatchCpu(f);
      SingleOp b(backward, {type, type});
      fillAll(b, rng);
      expectCudaBitsMatchCpu(b);
    }
  }
}

// clip and clip_backward (issue 44): the bounds by value, the same clipValue on both sides.
TEST(CudaElementwiseKernels, ClipAndBackwardMatchCpuBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(15);
  const SingleOp::Attrs bounds{{"min", -0.5}, {"max", 0.75}};
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    const ir::TensorType type{t, kOdd};
    SingleOp clip(Op::kClip, {type}, bounds);
    fillAll(clip, rng);
    expectCudaBitsMatchCpu(clip);
    SingleOp back(Op::kClipBackward, {type, type}, bounds);
    fillAll(back, rng);
    expectCudaBitsMatchCpu(back);
  }
}

// pad and pad_backward (issue 44): backend/pad_math.h's index math on both sides, so the
// CPU's bits, the backward's sums in the same order; each mode, and every axis padded.
TEST(CudaElementwiseKernels, PadAndBackwardMatchCpuBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(16);
  const ir::Shape x{2, 3, 5, 6};
  struct Case {
    const char* mode;
    std::vector<int64_t> pads;
  };
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    for (const Case& c :
         {Case{"constant", {1, 0, 2, 1, 0, 2, 1, 3}}, Case{"reflect", {0, 0, 1, 2, 0, 0, 3, 1}},
          Case{"edge", {0, 1, 2, 3, 1, 0, 2, 0}}}) {
      SCOPED_TRACE(std::string(ir::dtypeName(t)) + " " + c.mode);
      const SingleOp::Attrs attrs{{"pads", c.pads}, {"mode", ir::EnumWord{c.mode}}, {"value", 0.5}};
      SingleOp f(Op::kPad, {{t, x}}, attrs);
      fillAll(f, rng);
      expectCudaBitsMatchCpu(f);
      SingleOp b(Op::kPadBackward, {f.node().result()->type(), {t, x}}, attrs);
      fillAll(b, rng);
      expectCudaBitsMatchCpu(b);
    }
  }
}

TEST(CudaElementwiseKernels, LargeReluWrapsTheGridStrideLoop) {
  TANDEM_SKIP_WITHOUT_GPU();
  // 5,000,007 f32: more packs than the grid has threads (2112 blocks x 256), and a tail.
  std::mt19937 rng(12);
  SingleOp relu(Op::kRelu, {f32({5, 1000001, 1, 1})});
  fillAll(relu, rng);
  expectCudaBitsMatchCpu(relu);
}

TEST(CudaElementwiseKernels, AddMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16, ir::DType::kI32}) {
    SCOPED_TRACE(ir::dtypeName(t));
    const ir::TensorType type{t, kOdd};
    SingleOp add(Op::kAdd, {type, type});
    fillAll(add, rng);
    expectCudaBitsMatchCpu(add);
  }
}

TEST(CudaElementwiseKernels, CastsMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  SingleOp down(Op::kCast, {f32(kOdd)}, {{"dtype", ir::EnumWord{"bf16"}}});
  fillAll(down, rng);
  expectCudaBitsMatchCpu(down);
  SingleOp up(Op::kCast, {bf16(kOdd)}, {{"dtype", ir::EnumWord{"f32"}}});
  fillAll(up, rng);
  expectCudaBitsMatchCpu(up);
}

// A model's i64 ids and labels narrowed to i32 (issue 42): i32 values unchanged, the others
// saturated, on the GPU as on the host (backend/narrow_ids.h, host-tested by
// tests/backend/narrow_ids_kernel_test.cc).
TEST(CudaElementwiseKernels, I64CastMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(15);
  SingleOp narrow(Op::kCast, {ir::TensorType{ir::DType::kI64, {kOdd}}},
                  {{"dtype", ir::EnumWord{"i32"}}});
  auto* ids = reinterpret_cast<int64_t*>(narrow.in(0).view().data);
  const int64_t edges[] = {0,
                           -1,
                           std::numeric_limits<int32_t>::max(),
                           std::numeric_limits<int32_t>::min(),
                           int64_t{std::numeric_limits<int32_t>::max()} + 1,
                           int64_t{std::numeric_limits<int32_t>::min()} - 1,
                           std::numeric_limits<int64_t>::max(),
                           std::numeric_limits<int64_t>::min()};
  for (int64_t i = 0; i < narrow.in(0).size(); ++i)
    ids[i] = i < static_cast<int64_t>(std::size(edges)) ? edges[i]
                                                        : static_cast<int64_t>(rng()) >> (i % 40);
  expectCudaBitsMatchCpu(narrow);
}

TEST(CudaElementwiseKernels, GlobalAvgPoolsMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(15);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    // ResNet-50's last pool (7 x 7 planes) for a small batch, and an odd one.
    for (ir::Shape x : {ir::Shape{4, 2048, 7, 7}, ir::Shape{3, 5, 9, 13}}) {
      SingleOp fwd(Op::kGlobalAvgPool, {ir::TensorType{t, x}});
      fillAll(fwd, rng);
      expectCudaBitsMatchCpu(fwd);
      SingleOp back(Op::kGlobalAvgPoolBackward,
                    {ir::TensorType{t, {x[0], x[1], 1, 1}}, ir::TensorType{t, x}});
      fillAll(back, rng);
      expectCudaBitsMatchCpu(back);
    }
  }
}

TEST(CudaElementwiseKernels, ConstantFillsF32AndI32) {
  TANDEM_SKIP_WITHOUT_GPU();
  SingleOp f(Op::kConstant, {}, {{"value", 0.25}}, {}, {f32(kOdd)});
  expectCudaBitsMatchCpu(f);
  SingleOp scalar(Op::kConstant, {}, {{"value", -1.5}}, {}, {ir::TensorType{ir::DType::kF32, {}}});
  expectCudaBitsMatchCpu(scalar);
  SingleOp i(Op::kConstant, {}, {{"value", 7.0}}, {}, {i32({5})});
  expectCudaBitsMatchCpu(i);
}

TEST(CudaElementwiseKernels, ConstantRejectsFractionForI32) {
  TANDEM_SKIP_WITHOUT_GPU();
  SingleOp op(Op::kConstant, {}, {{"value", 0.5}}, {}, {i32({4})});
  auto device = cu::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_TRUE(device.ok()) << device.status();
  auto k = (*device)->makeKernel(op.node());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << k.status();
}

/// initialize of a variable `name` (the test's seed is SingleOp's, 1234).
SingleOp initOp(const std::string& name, ir::TensorType type, ir::Initializer::Kind kind) {
  return SingleOp(Op::kInitialize, {}, {{"var", ir::Symbol{name}}},
                  {ir::Var{name, std::move(type), ir::VarRole::kParam, {kind}}});
}

TEST(CudaElementwiseKernels, InitializeIsTheCpuValueToTheBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  backend::DeviceOptions options;
  options.seed = 1234;  // SingleOp's CPU context
  using Kind = ir::Initializer::Kind;
  SingleOp conv = initOp("conv1.w", f32({64, 3, 7, 7}), Kind::kKaiming);
  expectCudaBitsMatchCpu(conv, options);
  SingleOp fc = initOp("fc.w", f32({10, 500}), Kind::kKaiming);
  expectCudaBitsMatchCpu(fc, options);
  SingleOp ones = initOp("bn.gamma", f32({64}), Kind::kOnes);
  expectCudaBitsMatchCpu(ones, options);
  SingleOp count = initOp("steps", ir::TensorType{ir::DType::kI32, {}}, Kind::kZeros);
  expectCudaBitsMatchCpu(count, options);

  // Launched again, it writes the same values (no generator state).
  SingleOp again = initOp("fc.w", f32({10, 500}), Kind::kKaiming);
  std::vector<Buffer> none;
  CudaRun twice = runOnCuda(again, none, /*runs=*/2, options);
  again.run();
  ASSERT_EQ(twice.results.size(), 1u);
  expectSameBits(twice.results[0], again.out(0), "initialize launched twice");

  // Another seed, other values.
  options.seed = 1235;
  SingleOp other = initOp("fc.w", f32({10, 500}), Kind::kKaiming);
  CudaRun reseeded = runOnCuda(other, none, 1, options);
  other.run();
  ASSERT_EQ(reseeded.results.size(), 1u);
  EXPECT_NE(std::memcmp(reseeded.results[0].f32(), other.out(0).f32(), 5000 * sizeof(float)), 0);
}

TEST(CudaElementwiseKernels, InitializeNamesTheVariableItCannotFill) {
  TANDEM_SKIP_WITHOUT_GPU();
  SingleOp op = initOp("fc.b", f32({10}), ir::Initializer::Kind::kKaiming);
  auto device = cu::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_TRUE(device.ok()) << device.status();
  auto k = (*device)->makeKernel(op.node());
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("@fc.b"), absl::string_view::npos) << k.status();
}

TEST(CudaElementwiseKernels, FlattenAndBackwardCopy) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(16);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    SingleOp flat(Op::kFlatten, {ir::TensorType{t, kOdd}});
    fillAll(flat, rng);
    expectCudaBitsMatchCpu(flat);
    SingleOp back(Op::kFlattenBackward,
                  {ir::TensorType{t, {3, 5 * 7 * 11}}, ir::TensorType{t, kOdd}});
    fillAll(back, rng);
    expectCudaBitsMatchCpu(back);
  }
}

/// Device memory for a test that launches kernels itself.
struct DeviceArray {
  void* p = nullptr;
  explicit DeviceArray(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DeviceArray() { cudaFree(p); }
  template <typename T>
  T* at(size_t byte_offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + byte_offset);
  }
};

// assign has no IR results: the runtime passes the variable's storage as the one out view.
TEST(CudaElementwiseKernels, AssignCopiesIntoVariableStorage) {
  TANDEM_SKIP_WITHOUT_GPU();
  const ir::TensorType t = f32(kOdd);
  SingleOp op(Op::kAssign, {t}, {{"var", ir::Symbol{"w"}}},
              {ir::Var{"w", t, ir::VarRole::kParam, {}}});
  std::mt19937 rng(17);
  fill(op.in(0), rng);
  auto device = cu::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_TRUE(device.ok()) << device.status();
  backend::Device& d = **device;
  auto k = d.makeKernel(op.node());
  ASSERT_TRUE(k.ok()) << k.status();
  const size_t bytes = static_cast<size_t>(t.bytes());
  DeviceArray value(bytes), storage(bytes);
  backend::TensorView in[] = {{value.p, t, {}}};
  backend::TensorView out[] = {{storage.p, t, {}}};
  ASSERT_EQ(cudaMemcpy(value.p, op.in(0).f32(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE((*k)->launch(d.computeStream(), in, out).ok());
  // Onto itself (a plan that gave the value the variable's buffer): nothing to do.
  backend::TensorView same[] = {{storage.p, t, {}}};
  ASSERT_TRUE((*k)->launch(d.computeStream(), same, out).ok());
  ASSERT_TRUE(d.computeStream().synchronize().ok());
  Buffer got(t);
  ASSERT_EQ(cudaMemcpy(got.f32(), storage.p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  expectSameBits(got, op.in(0), "assign");
}

// The launch functions straight: operands and results 4 bytes past a 16-byte boundary
// (the one-element path), and results written over an operand (a memory plan reusing
// its buffer), against the host-compiled math.
TEST(CudaElementwiseKernels, UnalignedAndInPlaceLaunches) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(18);
  const int64_t n = 1155;
  const size_t bytes = static_cast<size_t>(n) * 4 + 64;
  Buffer a(f32({n})), b(f32({n}));
  fill(a, rng);
  fill(b, rng);
  DeviceArray da(bytes), db(bytes), dc(bytes);
  for (size_t offset : {size_t{4}, size_t{0}}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    float* pa = da.at<float>(offset);
    float* pb = db.at<float>(offset);
    float* pc = dc.at<float>(offset);
    ASSERT_EQ(cudaMemcpy(pa, a.f32(), static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(pb, b.f32(), static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    cu::launchUnary<backend::ReluMath>(pa, pc, n, nullptr);
    cu::launchAdd(pa, pb, pa, n, nullptr);  // in place: a = a + b
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    Buffer relu(f32({n})), sum(f32({n})), want_relu(f32({n})), want_sum(f32({n}));
    ASSERT_EQ(cudaMemcpy(relu.f32(), pc, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(sum.f32(), pa, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t i = 0; i < n; ++i) {
      want_relu.f32()[i] = backend::reluValue(a.f32()[i]);
      want_sum.f32()[i] = cu::addValue(a.f32()[i], b.f32()[i]);
    }
    expectSameBits(relu, want_relu, "relu");
    expectSameBits(sum, want_sum, "add in place");
  }
  // bf16 in place, 2 bytes past a boundary.
  Buffer h(bf16({n}));
  fill(h, rng);
  uint16_t* ph = da.at<uint16_t>(2);
  ASSERT_EQ(cudaMemcpy(ph, bits16(h), static_cast<size_t>(n) * 2, cudaMemcpyHostToDevice),
            cudaSuccess);
  cu::launchUnary<backend::ReluMath>(ph, ph, n, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  Buffer got(bf16({n})), want(bf16({n}));
  ASSERT_EQ(cudaMemcpy(bits16(got), ph, static_cast<size_t>(n) * 2, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int64_t i = 0; i < n; ++i)
    cu::store(bits16(want), i, backend::reluValue(cu::load(bits16(h), i)));
  expectSameBits(got, want, "bf16 relu in place");
}

}  // namespace
}  // namespace tandem::testing
