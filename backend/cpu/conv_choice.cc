// The CPU convolution rule: which strategy runs each pass of each shape, from the
// measurements below (bench/cpu_kernels_bench.cc runs them all), and its words in a plan.

#include "backend/cpu/conv_choice.h"

#include <algorithm>
#include <array>
#include <utility>

#include "ir/ir.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

constexpr std::array<std::pair<ConvStrategy, absl::string_view>, 5> kWords = {{
    {ConvStrategy::kPlain, "plain"},
    {ConvStrategy::kBlocked, "blocked"},
    {ConvStrategy::kWinograd, "winograd"},
    {ConvStrategy::kGemm, "gemm"},
    {ConvStrategy::kTaps, "taps"},
}};

/// Whether any window of `g` reads padding.
bool padded(const ConvGeometry& g) {
  return std::max({g.pad_h, g.pad_w, g.pad_end_h, g.pad_end_w}) > 0;
}

/// Winograd F(4x4, 3x3) works on 4x4 tiles of the output: their count over the batch.
int64_t winogradTiles(const ConvGeometry& g) {
  return g.batch * ((g.out_height + 3) / 4) * ((g.out_width + 3) / 4);
}

/// bf16 (mixed precision): the blocked JIT kernels (jit_bf16, AVX512_BF16 dot products)
/// for every pass. On plain tensors oneDNN 2.6 runs bf16 as im2col + a bf16 GEMM, which
/// loses to them everywhere it was measured; only one input channel (a stem) stays plain,
/// its 16-channel block being mostly padding.
ConvStrategy bf16Strategy(const ConvGeometry& g) {
  return g.channels >= 8 || g.groups > 1 ? ConvStrategy::kBlocked : ConvStrategy::kPlain;
}

/// Winograd against the better direct strategy, the kernel as a whole (reorders of
/// activations and filters included), one thread, ms, best of 6 runs of
/// bench/cpu_kernels_bench.cc (N=128: of 3) on a shared 2-core AMD EPYC with AVX-512,
/// oneDNN 2.6 (jit_wino_4x3 against the blocked jit:avx512_core or plain GEMM):
///
///   C -> O      HxW    N   forward       backward data   backward filter
///   64 -> 64    28    32    4.3 /  8.4    4.7 /  8.5      4.9 /  8.9
///                     64    9.8 / 16.8   11.0 / 17.1     16.5 / 18.0
///                    128   23.0 / 35.4   23.0 / 36.4     42.7 / 37.3
///   128 -> 128  14    32    5.2 /  7.9    5.5 /  8.0      5.7 /  8.2
///                     64   11.0 / 15.7   10.9 / 16.2     12.6 / 16.4
///                    128   23.9 / 36.1   24.5 / 39.9     27.4 / 33.9
///   256 -> 256   7    32    5.1 /  7.5    5.6 /  7.5      4.9 /  8.3
///                     64    7.5 / 14.8    7.8 / 15.1      9.2 / 16.6
///   512 -> 512   4    32   10.8 / 10.2   10.9 /  9.1      8.2 / 12.5
///                     64   12.4 / 19.8   14.8 / 16.7     11.8 / 23.8
///   1 -> 64     28    32    1.4 /  0.3    1.5 /  0.3      1.1 /  0.3  (ResNet-18's stem)
///                     64    3.0 /  0.7    4.5 /  0.5      3.5 /  0.9
///   1 -> 20     28   128    3.2 /  0.6    4.3 /  0.6      5.0 /  0.8  (LeNet's conv1)
///
/// So Winograd, where oneDNN has it (3x3, stride 1, pad <= 1, AVX-512), when:
///  - both channel counts are at least 64: one input channel is 3.5-9x slower (its
///    16-channel block is padding). Nothing between 1 and 64 was measured.
///  - forward and backward data: at least 64 output tiles. Each run transforms the
///    filters (4x their size), a fixed cost the tiles amortize: 512 channels at 4x4 (one
///    tile per image) lose 6% and 20% at N=32 and win 37% and 11% at N=64.
///  - backward filter: at most 4096 tiles. Beyond, its transformed operands outgrow the
///    caches: 64 channels at 28x28 win 45% at N=32 (1568 tiles) and 8% at N=64 (3136),
///    lose 14% at N=128 (6272) and 18% at N=256.
///
/// Apart from kGemm's, the choice does not look at the activations' layout between kernels
/// (assign-layouts): a plain GEMM convolution then reorders a blocked operand itself. Switching
/// those (the 1x1 shortcuts) to the blocked kernel would change the order of the additions and with
/// it fused training's bit-for-bit agreement with unfused, for a gain inside the noise
/// (0.77 vs 0.79 ms at 64 -> 128, N=32).
///
/// kGemm (im2col + oneDNN's matmul over chunks of images, gemm_conv.h) against oneDNN's
/// plain (its own GEMM convolution) and blocked kernels, one thread, f32, ms, median of 3
/// runs of bench/cpu_kernels_bench.cc on the shared 2-core AVX-512 EPYC, 2026-11-30, with
/// im2col's AVX-512 rows (im2col.cc):
///
///   C -> O     HxW  K   N    forward             backward data       backward filter
///                           gemm  plain blocked  gemm  plain blocked  gemm  plain blocked
///   1 -> 20    28   3  128  0.60  0.92  1.79     0.51  0.95  9.25     1.35  2.66  1.01
///   20 -> 50   13   5  128  5.89  8.68  9.72     6.29  9.99  9.83     6.68  8.47 11.1
///   1 -> 64    28   3   32  0.42  0.58  0.53     0.31  0.46  4.65     1.32  1.77  0.55
///                                                                    (ResNet-18's stem, pad 1)
///
/// So kGemm, for f32 convolutions without groups whose window is more than one pixel and
/// whose input has fewer than 32 channels (LeNet's two; nothing wider was measured, and
/// from 64 channels the blocked and Winograd kernels on blocked activations are the
/// measured ones), except the backward filter of fewer than 8 input channels, where
/// oneDNN's blocked kernel is 1.3-2.4x faster on AVX-512 and kTaps faster still
/// (fewChannelStrategy; on AVX2, plain was: see the direct rule). The choice holds only
/// where the activations are plain between kernels (gemmRuns); elsewhere the direct rule.
bool gemmWins(const ConvGeometry& g) {
  const int64_t window = g.kernel_h * g.kernel_w;
  if (g.dtype != ir::DType::kF32 || g.groups > 1 || window == 1 || g.channels >= 32) return false;
  return g.pass != ConvPass::kBackwardFilter || g.channels >= 8;
}

/// Convolutions of fewer than 8 input channels on AVX-512, f32 without groups: kTaps
/// where its rows fit (tapsApply), the window has no padding (its fast paths: every tap
/// reads whole rows) and the activations are plain; else, for the backward filter,
/// oneDNN's blocked kernel (the table above; on AVX2 im2col + GEMM was the faster:
/// directStrategy), and for the forward the rules below. One thread, ms, median of 3
/// (cpu_kernels_bench's ConvForward and ConvBackwardFilter, 2026-11-30):
///
///   C -> O   HxW  K  pad   N    pass       taps  blocked  gemm
///   1 -> 20  28   3   0   128   forward    0.42    1.79   0.64   LeNet's conv1
///   1 -> 20  28   3   0   128   bwd filter 0.78    1.36   1.44
///   1 -> 64  28   3   1    32   bwd filter 1.24    0.52   1.32   ResNet-18's stem
///
/// In training the blocked backward filter's reorder of dy into nChw16c costs more than
/// the table shows (ONEDNN_VERBOSE, LeNet: 1.47 ms of reorder beside 0.72 of convolution a
/// step), where kTaps reads dy as it lies; kGemm's forward writes its product and adds the
/// bias in a second pass over y. With padding kTaps masks every tap's loads and loses.
std::optional<ConvStrategy> fewChannelStrategy(const ConvGeometry& g, bool plain,
                                               const ConvHost& host) {
  if (!host.avx512 || g.dtype != ir::DType::kF32 || g.groups != 1 || g.channels >= 8)
    return std::nullopt;
  const bool taps = plain && !padded(g) && tapsApply(g);
  switch (g.pass) {
    case ConvPass::kForward:
      if (taps) return ConvStrategy::kTaps;
      break;
    case ConvPass::kBackwardFilter:
      return taps ? ConvStrategy::kTaps : ConvStrategy::kBlocked;
    case ConvPass::kBackwardData:
      break;
  }
  return std::nullopt;
}

/// The end padding the last window of an axis reaches (never negative, at most `pad`).
int64_t endPad(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad) {
  return std::clamp<int64_t>((out - 1) * stride + kernel - in - pad, 0, pad);
}

}  // namespace

absl::string_view strategyWord(ConvStrategy s) {
  for (const auto& [strategy, word] : kWords)
    if (strategy == s) return word;
  return "auto";
}

std::optional<ConvStrategy> strategyNamed(absl::string_view word) {
  for (const auto& [strategy, w] : kWords)
    if (w == word) return strategy;
  return std::nullopt;
}

std::optional<ConvGeometry> convGeometry(const ir::Node& n) {
  // The operand (or result) slots of x, w and y.
  struct Slots {
    ConvPass pass;
    int x, w, y;  // operand index; y < 0: result 0
  };
  std::optional<Slots> slots;
  switch (n.op()) {
    case ir::Op::kConv2d:
    case ir::Op::kConv2dStats:
    case ir::Op::kConv2dBiasAct:
      slots = Slots{ConvPass::kForward, 0, 1, -1};
      break;
    case ir::Op::kConv2dBackwardData:  // dy, w, x -> dx
      slots = Slots{ConvPass::kBackwardData, 2, 1, 0};
      break;
    case ir::Op::kConv2dBackwardFilter:  // dy, x, w -> dw, db?
      slots = Slots{ConvPass::kBackwardFilter, 1, 2, 0};
      break;
    default:
      return std::nullopt;
  }
  const ir::TensorType& x = n.operand(slots->x)->type();
  const ir::Shape& w = n.operand(slots->w)->type().shape;
  const ir::Shape& y = slots->y < 0 ? n.result(0)->type().shape : n.operand(slots->y)->type().shape;
  const ir::Hw stride = ir::attr::stride(n), pad = ir::attr::pad(n);
  ConvGeometry g{.pass = slots->pass,
                 .dtype = x.dtype,
                 .batch = x.shape[0],
                 .channels = x.shape[1],
                 .height = x.shape[2],
                 .width = x.shape[3],
                 .out_channels = y[1],
                 .out_height = y[2],
                 .out_width = y[3],
                 .kernel_h = w[2],
                 .kernel_w = w[3],
                 .groups = ir::attr::groups(n),
                 .stride_h = stride.h,
                 .stride_w = stride.w,
                 .pad_h = pad.h,
                 .pad_w = pad.w};
  g.pad_end_h = endPad(g.height, g.out_height, g.kernel_h, g.stride_h, g.pad_h);
  g.pad_end_w = endPad(g.width, g.out_width, g.kernel_w, g.stride_w, g.pad_w);
  return g;
}

bool tapsApply(const ConvGeometry& g) {
  constexpr int64_t kRowColumns = 32;  // tap_conv.h's two vectors of 16 floats
  const bool rows =
      g.groups == 1 && g.stride_w == 1 && g.width <= kRowColumns && g.out_width <= kRowColumns;
  switch (g.pass) {
    case ConvPass::kForward:
      return rows && !padded(g);
    case ConvPass::kBackwardFilter:
      return rows;
    case ConvPass::kBackwardData:
      break;
  }
  return false;
}

bool winogradApplies(const ConvGeometry& g) {
  if (g.groups > 1) return false;  // oneDNN's Winograd has no groups
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 &&
         std::max({g.pad_h, g.pad_w, g.pad_end_h, g.pad_end_w}) <= 1;
}

/// Direct convolution, plain or blocked. Measured with one thread on AVX2
/// (bench/cpu_kernels_bench.cc, LeNet at N=128 and ResNet-18 at N=32, best of 4):
///  - 1x1 filters: plain everywhere (GEMM needs no im2col then; blocked 10-20% slower).
///  - forward: the blocked JIT kernel wins 23-43% from 20 input channels on (LeNet's
///    conv2, ResNet's 3x3s); at 4x4 outputs it ties on AVX2 and wins on AVX-512 (512
///    channels at N=32, best of 3: 10.7 vs 13.2 ms at stride 1, 4.2 vs 7.0 ms for the
///    stride-2 256->512); with one input channel GEMM on the plain tensors wins by 10-20%.
///  - backward data: blocked wins 23-72% from 64 input channels; below that the channel
///    blocks of dx are mostly padding (1 channel: 5x slower, LeNet's 20: 8% slower).
///  - backward filter: im2col + GEMM wins (by up to 2x for one input channel) unless one
///    image's im2col buffer outgrows the L2 cache (ResNet's 64 channels at 28x28:
///    blocked 28% faster) or the convolution is strided with 64 or more input channels
///    (ResNet-18's stage-opening 3x3 stride-2 convolutions at N=32 on AVX-512, median of
///    3: 64->128 at 28x28 4.7 vs 6.7 ms, 128->256 at 14x14 4.8 vs 5.6 ms, 256->512 at
///    7x7 6.7 vs 7.2 ms; GEMM's strided im2col copies more than it saves).
///
/// Grouped and depthwise convolutions: blocked, where oneDNN has its JIT kernels (for
/// depthwise, jit_uni_dw_convolution, which reads nChw8c/nChw16c only); with plain tensors
/// it runs an im2col + GEMM per group, each group a sliver of a GEMM.
ConvStrategy directStrategy(const ConvGeometry& g) {
  if (g.groups > 1) return ConvStrategy::kBlocked;
  const int64_t c = g.channels, window = g.kernel_h * g.kernel_w;
  const int64_t out_hw = g.out_height * g.out_width;
  if (window == 1) return ConvStrategy::kPlain;
  bool blocked = false;
  switch (g.pass) {
    case ConvPass::kForward:
      blocked = c >= 8;
      break;
    case ConvPass::kBackwardData:
      blocked = c >= 32;
      break;
    case ConvPass::kBackwardFilter:
      blocked = c * window * out_hw * int64_t{sizeof(float)} > (int64_t{1} << 20) ||
                ((g.stride_h > 1 || g.stride_w > 1) && c >= 64);
      break;
  }
  return blocked ? ConvStrategy::kBlocked : ConvStrategy::kPlain;
}

ConvStrategy chooseConvStrategy(const ConvGeometry& g, bool gemm_runs, const ConvHost& host) {
  if (g.dtype == ir::DType::kBF16) return bf16Strategy(g);
  if (std::optional<ConvStrategy> s = fewChannelStrategy(g, gemm_runs, host)) return *s;
  if (gemm_runs && gemmWins(g)) return ConvStrategy::kGemm;
  // oneDNN 2.6's Winograd is f32 only, and AVX-512 only.
  if (host.winograd && host.avx512 && g.dtype == ir::DType::kF32 && winogradApplies(g) &&
      g.channels >= 64 && g.out_channels >= 64) {
    const int64_t tiles = winogradTiles(g);
    if (g.pass == ConvPass::kBackwardFilter ? tiles <= 4096 : tiles >= 64)
      return ConvStrategy::kWinograd;
  }
  return directStrategy(g);
}

bool gemmRuns(const ir::Node& n, const ConvGeometry& g,
              const ir::AlgorithmRules::LayoutOf& layout) {
  auto plainF32 = [&](const ir::Value& v) {
    return v.type().dtype == ir::DType::kF32 && layout(v) == ir::ActivationLayout::kPlain;
  };
  return g.groups == 1 && plainF32(*n.result(0)) &&
         std::all_of(n.operands().begin(), n.operands().end(),
                     [&](const ir::Value* v) { return plainF32(*v); });
}

ir::AlgorithmRules convAlgorithmRules(bool avx512) {
  return {
      .offered =
          [avx512](const ir::Node& n, const ir::AlgorithmRules::LayoutOf& layout) {
            std::vector<std::string> words;
            const std::optional<ConvGeometry> g = convGeometry(n);
            if (!g) return words;
            words = {"plain", "blocked"};
            if (avx512 && g->dtype == ir::DType::kF32 && winogradApplies(*g))
              words.emplace_back("winograd");
            if (gemmRuns(n, *g, layout)) {
              words.emplace_back("gemm");
              if (avx512 && tapsApply(*g)) words.emplace_back("taps");
            }
            return words;
          },
      .choose =
          [avx512](const ir::Node& n, const ir::AlgorithmRules::LayoutOf& layout, bool exact) {
            const std::optional<ConvGeometry> g = convGeometry(n);
            if (!g) return std::string();
            const ConvStrategy s = chooseConvStrategy(*g, gemmRuns(n, *g, layout),
                                                      {.avx512 = avx512, .winograd = !exact});
            return std::string(strategyWord(s));
          },
  };
}

}  // namespace tandem::backend::cpu
