// The convolution family on CUDA. Without a GPU: the descriptor geometry against the IR's
// shapes (stride 2, padding, 1x1, the 7x7 stem), the types and math modes, the algorithm
// choice and its cache key, and the own kernels' math (bias/residual/relu epilogue, bias
// gradient) run by host loops against the CPU kernels. With a GPU: every op through cuDNN
// against the CPU backend (f32 without TF32, with TF32, bf16 with f32 master weights).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_info.h"
#include "backend/cuda/conv_descriptors.h"
#include "backend/cuda/conv_math.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using cu::AlgoCandidate;
using cu::AlgoChoice;
using cu::ConvPass;
using ir::DType;
using ir::Op;

/// Host tests that run the CPU backend's bf16 convolutions need bf16 instructions.
#define SKIP_WITHOUT_CPU_BF16() \
  if (!backend::cpu::hostCpuInfo().bf16) GTEST_SKIP() << "this CPU has no bf16 instructions"

struct ConvCase {
  int64_t n, c, o, h, w;
  ir::Hw k, stride, pad;  // per axis: one int, or {h, w}
  int64_t groups = 1;     // cudnnSetConvolutionGroupCount (c = o = groups: depthwise)
  ir::Shape x() const { return {n, c, h, w}; }
  ir::Shape wt() const { return {o, c / groups, k.h, k.w}; }
  int64_t oh() const { return (h + 2 * pad.h - k.h) / stride.h + 1; }
  int64_t ow() const { return (w + 2 * pad.w - k.w) / stride.w + 1; }
  ir::Shape y() const { return {n, o, oh(), ow()}; }
  SingleOp::Attrs attrs() const {
    return {{"stride", stride.toAttr()}, {"pad", pad.toAttr()}, {"groups", groups}};
  }
};

// 3x3 stride 1 pad 1; 3x3 stride 2 pad 1 on an odd extent; 1x1 and the strided 1x1
// shortcut; LeNet's 5x5 without padding on one channel; more padding than the last
// window reaches; a non-square image with odd sizes everywhere.
const ConvCase kConvs[] = {{2, 3, 8, 9, 9, 3, 1, 1},
                           {2, 16, 32, 9, 9, 3, 2, 1},
                           {2, 32, 16, 6, 6, 1, 1, 0},
                           {2, 8, 16, 7, 7, 1, 2, 0},
                           {3, 1, 6, 12, 12, 5, 1, 0},
                           {1, 4, 5, 8, 8, 3, 2, 2},
                           {3, 5, 7, 11, 7, 3, 1, 1},
                           // Grouped (2 groups), depthwise at stride 1 and 2, a channel
                           // multiplier of 2 (MobileNet's and ResNeXt's convolutions).
                           {2, 8, 12, 7, 7, 3, 1, 1, 2},
                           {2, 16, 16, 9, 9, 3, 1, 1, 16},
                           {2, 32, 32, 9, 9, 3, 2, 1, 32},
                           {1, 4, 8, 6, 6, 5, 1, 2, 4},
                           // Height and width apart: Inception's 1x7 and 7x1, a 3x2 filter
                           // at strides (2, 1) and padding (1, 0), a depthwise 5x1.
                           {2, 8, 12, 9, 9, {1, 7}, 1, {0, 3}},
                           {2, 8, 12, 9, 9, {7, 1}, 1, {3, 0}},
                           {2, 3, 5, 7, 6, {3, 2}, {2, 1}, {1, 0}},
                           {1, 16, 16, 7, 7, {5, 1}, {1, 2}, {2, 0}, 16}};
// ResNet's stem: 7x7 stride 2 pad 3, 224 -> 112.
const ConvCase kStem{1, 3, 64, 224, 224, 7, 2, 3};

void fillAll(SingleOp& op, std::mt19937& rng) {
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    Buffer& b = op.in(i);
    if (b.type().dtype == DType::kBF16) {
      std::uniform_real_distribution<float> u(-1, 1);
      for (int64_t k = 0; k < b.size(); ++k)
        reinterpret_cast<uint16_t*>(b.view().data)[k] = cu::floatToBf16(u(rng));
    } else {
      b.fillUniform(rng);
    }
  }
}

// --- descriptors, types, algorithm choice ------------------------------------------------

TEST(CudaConvDescriptors, GeometryMatchesTheIr) {
  std::vector<ConvCase> cases(std::begin(kConvs), std::end(kConvs));
  cases.push_back(kStem);
  for (const ConvCase& c : cases) {
    SingleOp op(Op::kConv2d, {f32(c.x()), f32(c.wt())}, c.attrs());
    const ir::TensorType& y = op.node().result()->type();
    auto g = cu::convGeometry(f32(c.x()), f32(c.wt()), c.stride, c.pad, c.groups);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ((ir::Shape{g->n, g->o, g->oh, g->ow}), y.shape) << ir::toString(y);
    EXPECT_EQ((cu::ConvGeometry{.n = c.n,
                                .c = c.c,
                                .h = c.h,
                                .w = c.w,
                                .o = c.o,
                                .kh = c.k.h,
                                .kw = c.k.w,
                                .oh = y.shape[2],
                                .ow = y.shape[3],
                                .stride_h = c.stride.h,
                                .stride_w = c.stride.w,
                                .pad_h = c.pad.h,
                                .pad_w = c.pad.w,
                                .groups = c.groups}),
              *g);
    EXPECT_EQ(g->filterChannels(), c.wt()[1]);
  }
  auto stem = cu::convGeometry(f32(kStem.x()), f32(kStem.wt()), 2, 3);
  ASSERT_TRUE(stem.ok());
  EXPECT_EQ(stem->oh, 112);
  EXPECT_EQ(stem->ow, 112);
  // Stride 2 on an odd extent rounds down: (9 + 2 - 3) / 2 + 1 = 5.
  auto odd = cu::convGeometry(f32({1, 16, 9, 9}), f32({32, 16, 3, 3}), 2, 1);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->oh, 5);
}

TEST(CudaConvDescriptors, GeometryRejectsWhatCudnnCannotTake) {
  // A window wider than the padded image.
  EXPECT_FALSE(cu::convGeometry(f32({1, 1, 2, 2}), f32({1, 1, 5, 5}), 1, 1).ok());
  // More elements than cuDNN's int strides reach.
  EXPECT_FALSE(cu::convGeometry(f32({1024, 64, 256, 256}), f32({64, 64, 3, 3}), 1, 1).ok());
  // Mismatched channels; a window that fits one axis only.
  EXPECT_FALSE(cu::convGeometry(f32({1, 3, 8, 8}), f32({4, 2, 3, 3}), 1, 1).ok());
  EXPECT_FALSE(cu::convGeometry(f32({1, 3, 8, 2}), f32({4, 3, 3, 5}), 1, {1, 0}).ok());
  EXPECT_TRUE(cu::convGeometry(f32({1, 3, 8, 2}), f32({4, 3, 3, 5}), 1, {1, 2}).ok());
  // Groups that the channels do not split into: 6 outputs in 4 groups; 8 inputs against a
  // filter of 4 per group in 4 groups.
  EXPECT_FALSE(cu::convGeometry(f32({1, 8, 8, 8}), f32({6, 2, 3, 3}), 1, 1, 4).ok());
  EXPECT_FALSE(cu::convGeometry(f32({1, 8, 8, 8}), f32({8, 4, 3, 3}), 1, 1, 4).ok());
}

TEST(CudaConvDescriptors, TypesFollowPrecisionAndTf32) {
  auto tf32 = cu::convTypes(DType::kF32, DType::kF32, /*allow_tf32=*/true);
  ASSERT_TRUE(tf32.ok());
  EXPECT_EQ(tf32->data, CUDNN_DATA_FLOAT);
  EXPECT_EQ(tf32->compute, CUDNN_DATA_FLOAT);
  EXPECT_EQ(tf32->math, CUDNN_DEFAULT_MATH);
  EXPECT_FALSE(tf32->convert_w);
  EXPECT_FALSE(tf32->widen_dw);

  auto exact = cu::convTypes(DType::kF32, DType::kF32, /*allow_tf32=*/false);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->math, CUDNN_FMA_MATH);

  // Mixed precision: bf16 data, f32 accumulation, master weights converted both ways.
  auto master = cu::convTypes(DType::kBF16, DType::kF32, /*allow_tf32=*/false);
  ASSERT_TRUE(master.ok());
  EXPECT_EQ(master->act, DType::kBF16);
  EXPECT_EQ(master->data, CUDNN_DATA_BFLOAT16);
  EXPECT_EQ(master->compute, CUDNN_DATA_FLOAT);
  EXPECT_EQ(master->math, CUDNN_DEFAULT_MATH);  // TF32 is about f32 inputs only
  EXPECT_TRUE(master->convert_w);
  EXPECT_TRUE(master->widen_dw);

  auto pure = cu::convTypes(DType::kBF16, DType::kBF16, true);
  ASSERT_TRUE(pure.ok());
  EXPECT_FALSE(pure->convert_w);
  EXPECT_FALSE(pure->widen_dw);

  // What the IR rejects is rejected here too: a bf16 filter under f32 activations.
  EXPECT_FALSE(cu::convTypes(DType::kF32, DType::kBF16, true).ok());
  EXPECT_FALSE(cu::convTypes(DType::kF64, DType::kF64, true).ok());
}

TEST(CudaConvDescriptors, AlgorithmChoiceSkipsUnusableEntries) {
  auto tf32 = *cu::convTypes(DType::kF32, DType::kF32, true);
  auto exact = *cu::convTypes(DType::kF32, DType::kF32, false);
  const std::vector<AlgoCandidate> list{
      {7, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DETERMINISTIC, CUDNN_DEFAULT_MATH},
      {5, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_DEFAULT_MATH, cu::kMaxConvWorkspace + 1},
      {6, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, CUDNN_DEFAULT_MATH},
      {1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_TENSOR_OP_MATH},
      {0, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_DEFAULT_MATH},
  };
  // With TF32 the first supported deterministic entry, with its math type.
  auto a = cu::chooseAlgo(list, tf32);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (AlgoChoice{1, CUDNN_TENSOR_OP_MATH}));
  // Without, no tensor-op entry, and the descriptor keeps FMA.
  auto b = cu::chooseAlgo(list, exact);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (AlgoChoice{0, CUDNN_FMA_MATH}));
  // Only nondeterministic ones: the first of them rather than no convolution.
  auto c = cu::chooseAlgo({list[0], list[1], list[2]}, tf32);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (AlgoChoice{6, CUDNN_DEFAULT_MATH}));
  // Nothing usable: an error, never a guess.
  EXPECT_FALSE(cu::chooseAlgo({list[0], list[1]}, tf32).ok());
  EXPECT_FALSE(cu::chooseAlgo({list[3]}, exact).ok());
  EXPECT_FALSE(cu::chooseAlgo({}, tf32).ok());
}

TEST(CudaConvDescriptors, CacheKeySeparatesWhatChangesTheChoice) {
  const auto g = *cu::convGeometry(f32({2, 16, 9, 9}), f32({32, 16, 3, 3}), 2, 1);
  const auto t = *cu::convTypes(DType::kF32, DType::kF32, true);
  const std::string base = cu::algoCacheKey(ConvPass::kForward, g, t, 0);
  EXPECT_EQ(base, cu::algoCacheKey(ConvPass::kForward, g, t, 0));  // a key is a function

  std::set<std::string> keys{base};
  auto add = [&](const std::string& k) { EXPECT_TRUE(keys.insert(k).second) << k; };
  add(cu::algoCacheKey(ConvPass::kBackwardData, g, t, 0));
  add(cu::algoCacheKey(ConvPass::kBackwardFilter, g, t, 0));
  add(cu::algoCacheKey(ConvPass::kForward, g, t, 1));  // another GPU
  add(cu::algoCacheKey(ConvPass::kForward, g, *cu::convTypes(DType::kF32, DType::kF32, false), 0));
  add(cu::algoCacheKey(ConvPass::kForward, g, *cu::convTypes(DType::kBF16, DType::kF32, true), 0));
  add(cu::algoCacheKey(ConvPass::kForward,
                       *cu::convGeometry(f32({2, 16, 9, 9}), f32({32, 16, 3, 3}), 1, 1), t, 0));
  add(cu::algoCacheKey(ConvPass::kForward,
                       *cu::convGeometry(f32({2, 16, 9, 9}), f32({32, 8, 3, 3}), 2, 1, 2), t, 0));
  add(cu::algoCacheKey(ConvPass::kForward,
                       *cu::convGeometry(f32({2, 16, 9, 9}), f32({32, 16, 3, 3}), 2, 0), t, 0));
  add(cu::algoCacheKey(ConvPass::kForward,
                       *cu::convGeometry(f32({4, 16, 9, 9}), f32({32, 16, 3, 3}), 2, 1), t, 0));
  add(cu::algoCacheKey(ConvPass::kForward,
                       *cu::convGeometry(f32({2, 16, 9, 9}), f32({16, 16, 3, 3}), 2, 1), t, 0));
  add(cu::algoCacheKey(ConvPass::kForward,
                       *cu::convGeometry(f32({2, 16, 9, 9}), f32({32, 16, 1, 1}), 2, 1), t, 0));
  add(cu::algoCacheKey(ConvPass::kForward,
                       *cu::convGeometry(f32({2, 16, 9, 11}), f32({32, 16, 3, 3}), 2, 1), t, 0));
  // bf16 with master weights and pure bf16 run the same cuDNN call: one key.
  EXPECT_EQ(
      cu::algoCacheKey(ConvPass::kForward, g, *cu::convTypes(DType::kBF16, DType::kF32, true), 0),
      cu::algoCacheKey(ConvPass::kForward, g, *cu::convTypes(DType::kBF16, DType::kBF16, true), 0));
}

// --- own kernels' math against the CPU ---------------------------------------------------

/// conv2d without bias on the CPU, then convEpilogueAt over every element as conv.cu's
/// grid-stride loop applies it, against the CPU's fused node (conv2d with bias, or
/// conv2d_bias_act) on the same inputs.
void expectEpilogueMatchesCpu(const ConvCase& c, DType act, bool bias_act, bool residual, bool relu,
                              double tol, std::mt19937& rng) {
  const ir::TensorType xt{act, c.x()}, yt{act, c.y()};
  std::vector<ir::TensorType> types{xt, f32(c.wt()), f32({c.o})};
  SingleOp::Attrs attrs = c.attrs();
  if (bias_act) {
    attrs.emplace_back("relu", relu);
    if (residual) types.push_back(yt);
  }
  SingleOp fused(bias_act ? Op::kConv2dBiasAct : Op::kConv2d, types, attrs);
  SingleOp plain(Op::kConv2d, {xt, f32(c.wt())}, c.attrs());
  fillAll(fused, rng);
  for (size_t i : {0, 1})
    std::memcpy(plain.in(i).view().data, fused.in(i).view().data,
                static_cast<size_t>(fused.in(i).type().bytes()));
  fused.run();
  plain.run();
  Buffer& y = plain.out(0);
  const float* b = fused.in(2).f32();
  const int64_t hw = c.oh() * c.ow();
  for (int64_t i = 0; i < y.size(); ++i) {
    if (act == DType::kBF16) {
      auto* yb = reinterpret_cast<uint16_t*>(y.view().data);
      const auto* r =
          residual ? reinterpret_cast<const uint16_t*>(fused.in(3).view().data) : nullptr;
      cu::store(yb, i, cu::convEpilogueAt(yb, b, r, relu, i, c.o, hw));
    } else {
      const float* r = residual ? fused.in(3).f32() : nullptr;
      cu::store(y.f32(), i, cu::convEpilogueAt(y.f32(), b, r, relu, i, c.o, hw));
    }
  }
  EXPECT_LE(scaledError(y, fused.out(0)), tol)
      << fused.node().describe() << " k" << ir::toString(c.k.toAttr()) << " s"
      << ir::toString(c.stride.toAttr()) << " p" << ir::toString(c.pad.toAttr());
}

TEST(CudaConvMath, BiasEpilogueMatchesCpuF32) {
  // oneDNN adds the bias inside its accumulation, the epilogue after it: last-bit
  // differences only.
  std::mt19937 rng(31);
  for (const ConvCase& c : kConvs) {
    expectEpilogueMatchesCpu(c, DType::kF32, /*bias_act=*/false, false, false, 2e-6, rng);
    for (bool residual : {false, true})
      for (bool relu : {false, true})
        expectEpilogueMatchesCpu(c, DType::kF32, /*bias_act=*/true, residual, relu, 2e-6, rng);
  }
}

TEST(CudaConvMath, BiasEpilogueMatchesCpuBf16) {
  // bf16 output: the CPU rounds conv + bias once, cuDNN's output is rounded before the
  // bias is added: at most one more rounding (2^-8 of the scale).
  // The grouped cases: twice that. oneDNN's bf16 depthwise kernel rounds apart from its
  // dense one (measured 8.5e-3 of the scale at the 5x5 channel-multiplier case); the
  // epilogue's math is per output channel and never sees the groups.
  SKIP_WITHOUT_CPU_BF16();
  std::mt19937 rng(32);
  for (const ConvCase& c : kConvs) {
    const double tol = c.groups > 1 ? 1.6e-2 : 8e-3;
    expectEpilogueMatchesCpu(c, DType::kBF16, false, false, false, tol, rng);
    for (bool residual : {false, true})
      for (bool relu : {false, true})
        expectEpilogueMatchesCpu(c, DType::kBF16, true, residual, relu, tol, rng);
  }
}

TEST(CudaConvMath, EpilogueRoundsLikeTheCpuOps) {
  // The order of the CPU's fused op, element by element: bias (rounded to T), + residual,
  // relu as std::max(v, 0) (so -0 and NaN pass).
  const float y[] = {1.0f, -3.0f, -0.0f};
  const float b[] = {0.5f};
  const float r[] = {-2.0f, 1.0f, 0.0f};
  EXPECT_EQ(cu::convEpilogueAt(y, b, r, true, 0, 1, 3), 0.0f);  // 1.5 - 2 -> relu
  EXPECT_EQ(cu::convEpilogueAt(y, b, r, false, 0, 1, 3), -0.5f);
  EXPECT_EQ(cu::convEpilogueAt(y, b, r, true, 1, 1, 3), 0.0f);
  EXPECT_EQ(cu::convEpilogueAt(y, b, static_cast<const float*>(nullptr), false, 1, 1, 3), -2.5f);
  const float neg_zero[] = {-0.0f};  // -0 + -0 = -0, which std::max(v, 0) keeps
  EXPECT_TRUE(std::signbit(
      cu::convEpilogueAt(y, neg_zero, static_cast<const float*>(nullptr), true, 2, 1, 3)));
  // bf16: 1 + 2^-9 rounds to 1 (ties to even) before the residual is added.
  const uint16_t yb[] = {cu::floatToBf16(1.0f)};
  const float tiny[] = {0.001953125f};  // 2^-9
  const uint16_t rb[] = {cu::floatToBf16(0.0f)};
  EXPECT_EQ(cu::convEpilogueAt(yb, tiny, rb, false, 0, 1, 1), 1.0f);
}

/// biasGradPartial per thread and the tree of conv.cu's block, on the host.
template <typename T, typename D>
void hostBiasGrad(const T* dy, D* db, int64_t n, int64_t channels, int64_t hw) {
  for (int64_t c = 0; c < channels; ++c) {
    float partial[cu::kBiasGradThreads];
    for (int t = 0; t < cu::kBiasGradThreads; ++t)
      partial[t] = cu::biasGradPartial(dy, n, channels, hw, c, t);
    for (int s = cu::kBiasGradThreads / 2; s > 0; s /= 2)
      for (int t = 0; t < s; ++t) partial[t] = partial[t] + partial[t + s];
    cu::store(db, c, partial[0]);
  }
}

void expectBiasGradMatchesCpu(const ConvCase& c, DType act, double tol, std::mt19937& rng) {
  SingleOp::Attrs attrs = c.attrs();
  attrs.emplace_back("bias", true);
  SingleOp op(Op::kConv2dBackwardFilter, {{act, c.y()}, {act, c.x()}, f32(c.wt())}, attrs);
  ASSERT_EQ(op.node().result(1)->type(), f32({c.o}));  // master weights: an f32 gradient
  fillAll(op, rng);
  op.run();
  Buffer db(f32({c.o}));
  if (act == DType::kBF16)
    hostBiasGrad(reinterpret_cast<const uint16_t*>(op.in(0).view().data), db.f32(), c.n, c.o,
                 c.oh() * c.ow());
  else
    hostBiasGrad(op.in(0).f32(), db.f32(), c.n, c.o, c.oh() * c.ow());
  EXPECT_LE(scaledError(db, op.out(1)), tol) << op.node().describe();
}

TEST(CudaConvMath, BiasGradientMatchesCpu) {
  std::mt19937 rng(33);
  for (const ConvCase& c : kConvs) expectBiasGradMatchesCpu(c, DType::kF32, 1e-5, rng);
  expectBiasGradMatchesCpu({8, 4, 6, 40, 40, 3, 1, 1}, DType::kF32, 1e-5, rng);  // long sums
}

TEST(CudaConvMath, BiasGradientOfBf16MatchesCpu) {
  SKIP_WITHOUT_CPU_BF16();
  std::mt19937 rng(34);
  for (const ConvCase& c : kConvs) expectBiasGradMatchesCpu(c, DType::kBF16, 1e-5, rng);
}

// --- on a GPU ---------------------------------------------------------------------------

/// One precision of the GPU tests: the activations' dtype, the device options, tolerance.
struct Precision {
  const char* name;
  DType act;
  bool allow_tf32;
  double tol;
};
const Precision kPrecisions[] = {{"f32", DType::kF32, false, 1e-4},
                                 {"tf32", DType::kF32, true, 1e-3},
                                 {"bf16", DType::kBF16, true, 2e-2}};

/// Runs op (fresh inputs) on the GPU and the CPU and compares.
void check(SingleOp& op, const Precision& p, std::mt19937& rng) {
  fillAll(op, rng);
  SCOPED_TRACE(p.name);
  expectCudaMatchesCpu(op, p.tol, tf32Options(p.allow_tf32));
}

std::vector<ConvCase> gpuCases() {
  std::vector<ConvCase> cases(std::begin(kConvs), std::end(kConvs));
  cases.push_back({2, 3, 16, 32, 32, 7, 2, 3});  // a small stem
  return cases;
}

TEST(CudaConvKernels, ForwardMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(41);
  for (const Precision& p : kPrecisions) {
    if (p.act == DType::kBF16 && !backend::cpu::hostCpuInfo().bf16) continue;
    for (const ConvCase& c : gpuCases()) {
      SingleOp plain(Op::kConv2d, {{p.act, c.x()}, f32(c.wt())}, c.attrs());
      check(plain, p, rng);
      SingleOp biased(Op::kConv2d, {{p.act, c.x()}, f32(c.wt()), f32({c.o})}, c.attrs());
      check(biased, p, rng);
    }
  }
}

TEST(CudaConvKernels, BackwardDataMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(42);
  for (const Precision& p : kPrecisions) {
    if (p.act == DType::kBF16 && !backend::cpu::hostCpuInfo().bf16) continue;
    for (const ConvCase& c : gpuCases()) {
      SingleOp op(Op::kConv2dBackwardData, {{p.act, c.y()}, f32(c.wt()), {p.act, c.x()}},
                  c.attrs());
      check(op, p, rng);
    }
  }
}

TEST(CudaConvKernels, BackwardFilterMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  for (const Precision& p : kPrecisions) {
    if (p.act == DType::kBF16 && !backend::cpu::hostCpuInfo().bf16) continue;
    for (const ConvCase& c : gpuCases())
      for (bool bias : {false, true}) {
        SingleOp::Attrs attrs = c.attrs();
        attrs.emplace_back("bias", bias);
        SingleOp op(Op::kConv2dBackwardFilter, {{p.act, c.y()}, {p.act, c.x()}, f32(c.wt())},
                    attrs);
        check(op, p, rng);
      }
  }
}

TEST(CudaConvKernels, PureBf16WeightsMatchCpu) {
  // bf16 filters and biases (no master weights): no conversion, bf16 gradients.
  TANDEM_SKIP_WITHOUT_GPU();
  if (!backend::cpu::hostCpuInfo().bf16) GTEST_SKIP() << "this CPU has no bf16 instructions";
  std::mt19937 rng(44);
  const Precision& p = kPrecisions[2];
  for (const ConvCase& c : kConvs) {
    SingleOp fwd(Op::kConv2d, {bf16(c.x()), bf16(c.wt()), bf16({c.o})}, c.attrs());
    check(fwd, p, rng);
    SingleOp data(Op::kConv2dBackwardData, {bf16(c.y()), bf16(c.wt()), bf16(c.x())}, c.attrs());
    check(data, p, rng);
    SingleOp::Attrs attrs = c.attrs();
    attrs.emplace_back("bias", true);
    SingleOp filter(Op::kConv2dBackwardFilter, {bf16(c.y()), bf16(c.x()), bf16(c.wt())}, attrs);
    check(filter, p, rng);
  }
}

TEST(CudaConvKernels, StatsMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(45);
  for (const Precision& p : kPrecisions) {
    if (p.act == DType::kBF16 && !backend::cpu::hostCpuInfo().bf16) continue;
    for (const ConvCase& c : gpuCases()) {
      SingleOp op(Op::kConv2dStats, {{p.act, c.x()}, f32(c.wt()), f32({c.o})}, c.attrs());
      check(op, p, rng);
      SingleOp unbiased(Op::kConv2dStats, {{p.act, c.x()}, f32(c.wt())}, c.attrs());
      check(unbiased, p, rng);
    }
  }
}

TEST(CudaConvKernels, BiasActMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(46);
  for (const Precision& p : kPrecisions) {
    if (p.act == DType::kBF16 && !backend::cpu::hostCpuInfo().bf16) continue;
    for (const ConvCase& c : gpuCases())
      for (bool residual : {false, true})
        for (bool relu : {false, true}) {
          SingleOp::Attrs attrs = c.attrs();
          attrs.emplace_back("relu", relu);
          std::vector<ir::TensorType> types{{p.act, c.x()}, f32(c.wt()), f32({c.o})};
          if (residual) types.push_back({p.act, c.y()});
          SingleOp op(Op::kConv2dBiasAct, types, attrs);
          check(op, p, rng);
        }
  }
}

TEST(CudaConvKernels, RepeatedLaunchesGiveTheSameBits) {
  // The algorithms are deterministic ones and the bias gradient adds in a fixed order:
  // two launches of one kernel on the same inputs agree bit for bit.
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(47);
  const ConvCase c{4, 16, 32, 14, 14, 3, 1, 1};
  SingleOp::Attrs attrs = c.attrs();
  attrs.emplace_back("bias", true);
  SingleOp op(Op::kConv2dBackwardFilter, {f32(c.y()), f32(c.x()), f32(c.wt())}, attrs);
  fillAll(op, rng);
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < op.node().numOperands(); ++i) inputs.push_back(cloneBuffer(op.in(i)));
  CudaRun once = runOnCuda(op, inputs, 1);
  CudaRun twice = runOnCuda(op, inputs, 2);
  ASSERT_EQ(once.results.size(), 2u);
  ASSERT_EQ(twice.results.size(), 2u);
  for (size_t r = 0; r < 2; ++r)
    EXPECT_EQ(std::memcmp(once.results[r].view().data, twice.results[r].view().data,
                          static_cast<size_t>(once.results[r].type().bytes())),
              0)
        << "result " << r;
}

}  // namespace
}  // namespace tandem::testing
