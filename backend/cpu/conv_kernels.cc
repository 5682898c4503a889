// conv2d and its two backward ops on oneDNN convolution primitives.
//
// Tensors between kernels are plain NCHW/OIHW. oneDNN's fast convolutions want blocked
// layouts (nChw8c, OIhw8i8o on AVX2); given plain tensors it falls back to im2col + GEMM
// or, for few input channels, a JIT kernel that reads NCHW directly. chooseStrategy
// picks, per pass and shape, the cheapest of "plain tensors as they are", "blocked
// layouts with reorders inside the kernel", for 3x3 stride-1 convolutions on AVX-512
// Winograd F(4x4, 3x3) with the same reorders, and our own im2col + oneDNN matmul over
// chunks of images (gemm_conv.h); bench/cpu_kernels_bench.cc measures all four.

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_info.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/gemm_conv.h"
#include "backend/cpu/kernels.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

using dnnl::algorithm;
using dnnl::convolution_backward_data;
using dnnl::convolution_backward_weights;
using dnnl::convolution_forward;
using dnnl::memory;
using dnnl::prop_kind;

/// The tensors of one convolution and its window geometry, read off any of the three ops.
/// `w` is the filter as the IR has it ([O, C/groups, KH, KW]) in the activations' dtype: f32
/// master weights beside bf16 activations (mixed precision) are converted by the reorder
/// into the primitive's layout that runs anyway, so the cast costs no pass of its own.
struct ConvShape {
  ir::TensorType x, w, y;
  int64_t groups;
  memory::dims strides, pad_l, pad_r;
};

ConvShape convShape(const ir::Node& n, const ir::TensorType& x, const ir::TensorType& w,
                    const ir::TensorType& y) {
  const ir::Hw stride = ir::attr::stride(n), pad = ir::attr::pad(n);
  // The IR rounds the output extent down, so with a symmetric pad the last rows of
  // bottom/right padding may never be read: give oneDNN the end padding the last window
  // actually reaches (never negative), which keeps its shape check exact.
  auto endPad = [&](size_t axis, int64_t stride, int64_t pad) {
    int64_t reach = (y.shape[axis] - 1) * stride + w.shape[axis] - x.shape[axis] - pad;
    return std::clamp<int64_t>(reach, 0, pad);
  };
  return {x,
          {x.dtype, w.shape},
          y,
          ir::attr::groups(n),
          {stride.h, stride.w},
          {pad.h, pad.w},
          {endPad(2, stride.h, pad.h), endPad(3, stride.w, pad.w)}};
}

/// A filter of `s` in dtype `dt` as oneDNN's convolutions take it: [O, C, K, K], or with
/// groups [G, O/G, C/G, K, K], whose plain layout (goihw) is the IR's [O, C/G, K, K] bytes
/// as they are. Plain, or format `any` for the primitive to choose.
memory::desc filterDesc(const ConvShape& s, ir::DType dt, bool plain) {
  const ir::Shape& w = s.w.shape;
  const bool grouped = s.groups > 1;
  memory::dims dims = grouped ? memory::dims{s.groups, w[0] / s.groups, w[1], w[2], w[3]}
                              : memory::dims{w[0], w[1], w[2], w[3]};
  using tag = memory::format_tag;
  return memory::desc(dims, dnnlType(dt), !plain ? tag::any : grouped ? tag::goihw : tag::oihw);
}

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };

/// Whether oneDNN's Winograd kernel (jit_wino_4x3, F(4x4, 3x3)) can take the shape: 3x3
/// filters, stride 1, at most one row or column of padding per side. Creating the
/// primitive says the rest (it needs AVX-512).
bool winogradApplies(const ConvShape& s) {
  if (s.groups > 1) return false;  // oneDNN's Winograd has no groups
  auto atMostOne = [](const memory::dims& d) {
    return std::all_of(d.begin(), d.end(), [](memory::dim v) { return v <= 1; });
  };
  return s.w.shape[2] == 3 && s.w.shape[3] == 3 && s.strides == memory::dims{1, 1} &&
         atMostOne(s.pad_l) && atMostOne(s.pad_r);
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
ConvStrategy directStrategy(ConvPass pass, const ConvShape& s) {
  if (s.groups > 1) return ConvStrategy::kBlocked;
  const int64_t c = s.x.shape[1], window = s.w.shape[2] * s.w.shape[3];
  const int64_t out_hw = s.y.shape[2] * s.y.shape[3];
  if (window == 1) return ConvStrategy::kPlain;
  bool blocked = false;
  switch (pass) {
    case ConvPass::kForward:
      blocked = c >= 8;
      break;
    case ConvPass::kBackwardData:
      blocked = c >= 32;
      break;
    case ConvPass::kBackwardFilter:
      blocked = c * window * out_hw * int64_t{sizeof(float)} > (int64_t{1} << 20) ||
                ((s.strides[0] > 1 || s.strides[1] > 1) && c >= 64);
      break;
  }
  return blocked ? ConvStrategy::kBlocked : ConvStrategy::kPlain;
}

/// Winograd F(4x4, 3x3) works on 4x4 tiles of the output: their count over the batch.
int64_t winogradTiles(const ConvShape& s) {
  return s.y.shape[0] * ((s.y.shape[2] + 3) / 4) * ((s.y.shape[3] + 3) / 4);
}

/// bf16 (mixed precision): the blocked JIT kernels (jit_bf16, AVX512_BF16 dot products)
/// for every pass. On plain tensors oneDNN 2.6 runs bf16 as im2col + a bf16 GEMM, which
/// loses to them everywhere it was measured; only one input channel (a stem) stays plain,
/// its 16-channel block being mostly padding.
ConvStrategy bf16Strategy(const ConvShape& s) {
  return s.x.shape[1] >= 8 || s.groups > 1 ? ConvStrategy::kBlocked : ConvStrategy::kPlain;
}

/// The strategy for one pass (kAuto resolved); `winograd` is CpuContext::winograd().
///
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
/// The choice does not look at the activations' layout between kernels (layout_plan.h):
/// a plain GEMM convolution then reorders a blocked operand itself. Switching those (the
/// 1x1 shortcuts) to the blocked kernel would change the order of the additions and with
/// it fused training's bit-for-bit agreement with unfused, for a gain inside the noise
/// (0.77 vs 0.79 ms at 64 -> 128, N=32).
///
/// kGemm (im2col + oneDNN's matmul over chunks of images, gemm_conv.h) against oneDNN's
/// plain (its own GEMM convolution) and blocked kernels, one thread, f32, ms, median of 3
/// runs of bench/cpu_kernels_bench.cc on the shared 2-core AVX-512 EPYC, 2026-11-30:
///
///   C -> O     HxW  K   N    forward             backward data       backward filter
///                           gemm  plain blocked  gemm  plain blocked  gemm  plain blocked
///   1 -> 20    28   3  128  0.82  0.96  1.82     0.55  0.98  8.37     2.51  2.82  1.02
///   20 -> 50   13   5  128  7.94  8.66  9.61     8.24 10.0   9.63     8.17  8.75 10.7
///   1 -> 64    28   3   32  0.61  0.60  0.51     0.42  0.46  4.26     2.19  1.77  0.49
///                                                                    (ResNet-18's stem, pad 1)
///
/// So kGemm, for f32 convolutions without groups whose window is more than one pixel and
/// whose input has fewer than 32 channels (LeNet's two; nothing wider was measured, and
/// from 64 channels the blocked and Winograd kernels on blocked activations are the
/// measured ones), except the backward filter of fewer than 8 input channels, where
/// oneDNN's blocked kernel is 2.5-4.5x faster on AVX-512 (on AVX2, plain was: see the
/// direct rule). The choice holds only where the activations are plain between kernels
/// (gemmApplies); elsewhere the direct rule.
bool gemmWins(ConvPass pass, const ConvShape& s) {
  const int64_t c = s.x.shape[1], window = s.w.shape[2] * s.w.shape[3];
  if (s.x.dtype != ir::DType::kF32 || s.groups > 1 || window == 1 || c >= 32) return false;
  return pass != ConvPass::kBackwardFilter || c >= 8;
}

/// oneDNN's blocked backward-filter kernel for fewer than 8 input channels on AVX-512
/// (the table above); on AVX2 its im2col + GEMM was the faster (directStrategy).
bool fewChannelFilterBlocked(ConvPass pass, const ConvShape& s) {
  static const bool avx512 = hostCpuInfo().isa.rfind("avx512_core", 0) == 0;
  return avx512 && pass == ConvPass::kBackwardFilter && s.x.dtype == ir::DType::kF32 &&
         s.groups == 1 && s.x.shape[1] < 8;
}

ConvStrategy chooseStrategy(ConvStrategy requested, ConvPass pass, const ConvShape& s,
                            bool winograd) {
  if (requested != ConvStrategy::kAuto) return requested;
  if (s.x.dtype == ir::DType::kBF16) return bf16Strategy(s);
  if (gemmWins(pass, s)) return ConvStrategy::kGemm;
  if (fewChannelFilterBlocked(pass, s)) return ConvStrategy::kBlocked;
  // oneDNN 2.6's Winograd is f32 only.
  if (winograd && s.x.dtype == ir::DType::kF32 && winogradApplies(s) && s.x.shape[1] >= 64 && s.w.shape[0] >= 64) {
    int64_t tiles = winogradTiles(s);
    if (pass == ConvPass::kBackwardFilter ? tiles <= 4096 : tiles >= 64)
      return ConvStrategy::kWinograd;
  }
  return directStrategy(pass, s);
}

memory::desc layoutDesc(ConvStrategy strategy, const ir::TensorType& t) {
  return strategy == ConvStrategy::kPlain ? plainDesc(t) : anyDesc(t);
}

algorithm convAlgorithm(ConvStrategy strategy) {
  return strategy == ConvStrategy::kWinograd ? algorithm::convolution_winograd
                                             : algorithm::convolution_direct;
}

/// The forward primitive descriptor (also the hint the backward ones need).
convolution_forward::primitive_desc forwardPd(const ConvShape& s, ConvStrategy strategy,
                                              const memory::desc& bias, dnnl::engine& engine) {
  convolution_forward::desc d(prop_kind::forward_training, convAlgorithm(strategy),
                              layoutDesc(strategy, s.x),
                              filterDesc(s, s.w.dtype, strategy == ConvStrategy::kPlain), bias,
                              layoutDesc(strategy, s.y), s.strides, s.pad_l, s.pad_r);
  return convolution_forward::primitive_desc(d, userScratchpadAttr(), engine);
}

/// The operands whose NaN or infinity the strategy `st` of `pass` gets wrong, against
/// PyTorch's direct convolution (tests/backend/nonfinite_ops_test.cc):
///  - Winograd mixes a tile's inputs (and a filter's taps) in its transforms, so a NaN
///    reaches every output of its 4x4 tile and an inf becomes NaN (inf - inf): the two
///    float inputs, operands 0 and 1 of all three passes;
///  - GEMM over plain tensors (oneDNN's, or kGemm's) multiplies the zero padding too
///    (im2col), and 0 times a NaN or inf weight (forward) or output gradient (backward
///    filter) is NaN, where direct convolution never touches the padding: operand 1
///    forward, 0 backward filter.
/// The blocked direct kernel gets them right.
std::vector<size_t> nonFiniteHazards(ConvStrategy st, ConvPass pass, const ConvShape& s) {
  if (st == ConvStrategy::kWinograd) return {0, 1};
  auto padded = [](const memory::dims& d) {
    return std::any_of(d.begin(), d.end(), [](memory::dim v) { return v > 0; });
  };
  const bool over_padding = st == ConvStrategy::kPlain || st == ConvStrategy::kGemm;
  if (!over_padding || !(padded(s.pad_l) || padded(s.pad_r))) return {};
  switch (pass) {
    case ConvPass::kForward:
      return {1};
    case ConvPass::kBackwardFilter:
      return {0};
    case ConvPass::kBackwardData:
      break;  // col2im adds only the columns of real pixels
  }
  return {};
}

/// Whether kGemm can run the convolution of `init`: no groups, f32 operands and result 0 (its
/// copies are f32 loops), and every activation plain NCHW between kernels (they read it).
bool gemmApplies(const KernelInit& init, const ConvShape& s) {
  const ir::Node& n = init.node;
  if (s.groups > 1 || n.result(0)->type().dtype != ir::DType::kF32 || init.isBlocked(n.result(0)))
    return false;
  return std::all_of(n.operands().begin(), n.operands().end(), [&](const ir::Value* v) {
    return v->type().dtype == ir::DType::kF32 && !init.isBlocked(v);
  });
}

/// The batch and window of `s` as gemm_conv.h takes them.
GemmConvShape gemmShape(const ConvShape& s) {
  return {s.x.shape[0],
          s.y.shape[1],
          {.c = s.x.shape[1],
           .h = s.x.shape[2],
           .w = s.x.shape[3],
           .kh = s.w.shape[2],
           .kw = s.w.shape[3],
           .oh = s.y.shape[2],
           .ow = s.y.shape[3],
           .stride_h = s.strides[0],
           .stride_w = s.strides[1],
           .pad_h = s.pad_l[0],
           .pad_w = s.pad_l[1]}};
}

/// kGemm's kernel, `gemm(shape)`, with the blocked direct program of `build` for runs whose
/// operands it would mishandle (nonFiniteHazards).
template <typename Build, typename Gemm>
KernelOr buildGemmConv(ConvPass pass, const ConvShape& s, Build build, Gemm gemm) {
  ASSIGN_OR_RETURN(std::unique_ptr<GemmConvKernel> k, gemm(gemmShape(s)));
  std::vector<size_t> watched = nonFiniteHazards(ConvStrategy::kGemm, pass, s);
  if (!watched.empty()) {
    try {
      k->setExact(build(ConvStrategy::kBlocked), std::move(watched));
    } catch (const dnnl::error&) {
      // No blocked kernel for this shape: the fast one alone, as buildConv does.
    }
  }
  return std::unique_ptr<CpuKernel>(std::move(k));
}

/// The kernel of `build(strategy)`'s program (build throws dnnl::error when oneDNN cannot
/// make a primitive). Winograd that oneDNN cannot provide here (shape, CPU) falls back to
/// the direct rule: the strategy is an optimization, never a reason to fail. Where the
/// strategy mishandles non-finite operands (nonFiniteHazards), the blocked direct program
/// comes along for runs that hold one: a NaN or inf then gives PyTorch's results, at the
/// cost of one read of those operands per run, next to a convolution's many
/// multiply-adds per element.
template <typename Build, typename Gemm>
KernelOr buildConv(const KernelInit& init, absl::string_view what, ConvStrategy strategy,
                   ConvPass pass, const ConvShape& s, Build build, Gemm gemm) {
  const ir::Node& n = init.node;
  if (strategy == ConvStrategy::kGemm) {
    if (gemmApplies(init, s)) return buildGemmConv(pass, s, build, gemm);
    strategy = directStrategy(pass, s);
  }
  std::optional<DnnlProgram> fast;
  if (strategy == ConvStrategy::kWinograd) {
    if (winogradApplies(s)) {
      try {
        fast.emplace(build(strategy));
      } catch (const dnnl::error&) {
      }
    }
    if (!fast.has_value()) strategy = directStrategy(pass, s);
  }
  if (!fast.has_value()) {
    try {
      fast.emplace(build(strategy));
    } catch (const dnnl::error& e) {
      return dnnlFailure(n, what, e);
    }
  }
  std::vector<size_t> watched = nonFiniteHazards(strategy, pass, s);
  if (!watched.empty()) {
    try {
      return std::make_unique<ProgramKernel>(std::move(*fast), build(ConvStrategy::kBlocked),
                                             std::move(watched));
    } catch (const dnnl::error&) {
      // No blocked kernel for this shape: the fast one alone, as before.
    }
  }
  return std::make_unique<ProgramKernel>(std::move(*fast));
}

}  // namespace

KernelOr makeConv2dKernelWithStrategy(const KernelInit& init, ConvStrategy strategy) {
  const ir::Node& n = init.node;  // x, w, b? -> y
  ConvShape s = convShape(n, n.operand(0)->type(), n.operand(1)->type(), n.result()->type());
  bool bias = n.numOperands() > 2;
  ConvPass pass = ConvPass::kForward;
  strategy = chooseStrategy(strategy, pass, s, init.ctx.winograd());
  auto gemm = [&](const GemmConvShape& g) {
    return makeGemmConvForward(init.ctx, g, bias, n.describe());
  };
  return buildConv(
      init, "convolution", strategy, pass, s,
      [&](ConvStrategy st) {
        DnnlProgram p(init.ctx);
        memory::desc bias_md = bias ? plainDesc(n.operand(2)->type()) : memory::desc();
        auto pd = forwardPd(s, st, bias_md, p.engine());
        std::vector<std::pair<int, DnnlProgram::Slot>> args{
            {DNNL_ARG_SRC, p.inputAs(p.input(0, userDesc(init, n.operand(0))), pd.src_desc())},
            {DNNL_ARG_WEIGHTS,
             p.inputAs(p.input(1, filterDesc(s, n.operand(1)->type().dtype, true)),
                       pd.weights_desc())}};
        if (bias) args.emplace_back(DNNL_ARG_BIAS, p.input(2, n.operand(2)->type()));
        DnnlProgram::Slot y = p.output(0, userDesc(init, n.result(0)));
        DnnlProgram::Slot y_prim = p.outputAs(y, pd.dst_desc());
        args.emplace_back(DNNL_ARG_DST, y_prim);
        p.add(pd, convolution_forward(pd), args);
        p.storeTo(y_prim, y);
        return p;
      },
      gemm);
}

KernelOr makeConv2dBackwardDataKernelWithStrategy(const KernelInit& init, ConvStrategy strategy) {
  const ir::Node& n = init.node;  // dy, w, x -> dx
  ConvShape s = convShape(n, n.operand(2)->type(), n.operand(1)->type(), n.operand(0)->type());
  ConvPass pass = ConvPass::kBackwardData;
  strategy = chooseStrategy(strategy, pass, s, init.ctx.winograd());
  auto gemm = [&](const GemmConvShape& g) {
    return makeGemmConvBackwardData(init.ctx, g, n.describe());
  };
  return buildConv(
      init, "convolution backward-data", strategy, pass, s,
      [&](ConvStrategy st) {
        DnnlProgram p(init.ctx);
        auto hint = forwardPd(s, st, memory::desc(), p.engine());
        convolution_backward_data::desc d(convAlgorithm(st), layoutDesc(st, s.x),
                                          filterDesc(s, s.w.dtype, st == ConvStrategy::kPlain),
                                          layoutDesc(st, s.y), s.strides, s.pad_l, s.pad_r);
        convolution_backward_data::primitive_desc pd(d, userScratchpadAttr(), p.engine(), hint);
        DnnlProgram::Slot dy =
            p.inputAs(p.input(0, userDesc(init, n.operand(0))), pd.diff_dst_desc());
        DnnlProgram::Slot w = p.inputAs(p.input(1, filterDesc(s, n.operand(1)->type().dtype, true)),
                                        pd.weights_desc());
        DnnlProgram::Slot dx = p.output(0, userDesc(init, n.result(0)));
        DnnlProgram::Slot dx_prim = p.outputAs(dx, pd.diff_src_desc());
        p.add(pd, convolution_backward_data(pd),
              {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx_prim}});
        p.storeTo(dx_prim, dx);
        return p;
      },
      gemm);
}

KernelOr makeConv2dBackwardFilterKernelWithStrategy(const KernelInit& init, ConvStrategy strategy) {
  const ir::Node& n = init.node;  // dy, x, w -> dw, db?
  ConvShape s = convShape(n, n.operand(1)->type(), n.operand(2)->type(), n.operand(0)->type());
  // dw in the master weights' dtype: oneDNN's bf16 backward-filter accumulates in f32 and
  // writes f32 gradients directly.
  const ir::TensorType& dw_t = n.result(0)->type();
  bool bias = ir::attr::bias(n);
  ConvPass pass = ConvPass::kBackwardFilter;
  strategy = chooseStrategy(strategy, pass, s, init.ctx.winograd());
  auto gemm = [&](const GemmConvShape& g) {
    return makeGemmConvBackwardFilter(init.ctx, g, bias, n.describe());
  };
  return buildConv(
      init, "convolution backward-filter", strategy, pass, s,
      [&](ConvStrategy st) {
        DnnlProgram p(init.ctx);
        memory::desc bias_md = bias ? plainDesc(n.result(1)->type()) : memory::desc();
        auto hint = forwardPd(s, st, bias_md, p.engine());
        convolution_backward_weights::desc d(convAlgorithm(st), layoutDesc(st, s.x),
                                             filterDesc(s, dw_t.dtype, st == ConvStrategy::kPlain),
                                             bias_md, layoutDesc(st, s.y), s.strides, s.pad_l,
                                             s.pad_r);
        convolution_backward_weights::primitive_desc pd(d, userScratchpadAttr(), p.engine(), hint);
        DnnlProgram::Slot dw = p.output(0, filterDesc(s, dw_t.dtype, true)),
                          dw_prim = p.outputAs(dw, pd.diff_weights_desc());
        std::vector<std::pair<int, DnnlProgram::Slot>> args{
            {DNNL_ARG_DIFF_DST,
             p.inputAs(p.input(0, userDesc(init, n.operand(0))), pd.diff_dst_desc())},
            {DNNL_ARG_SRC, p.inputAs(p.input(1, userDesc(init, n.operand(1))), pd.src_desc())},
            {DNNL_ARG_DIFF_WEIGHTS, dw_prim}};
        if (bias) args.emplace_back(DNNL_ARG_DIFF_BIAS, p.output(1, n.result(1)->type()));
        p.add(pd, convolution_backward_weights(pd), args);
        p.storeTo(dw_prim, dw);
        return p;
      },
      gemm);
}

KernelOr makeConv2dKernel(const KernelInit& init) {
  return makeConv2dKernelWithStrategy(init, ConvStrategy::kAuto);
}
KernelOr makeConv2dBackwardDataKernel(const KernelInit& init) {
  return makeConv2dBackwardDataKernelWithStrategy(init, ConvStrategy::kAuto);
}
KernelOr makeConv2dBackwardFilterKernel(const KernelInit& init) {
  return makeConv2dBackwardFilterKernelWithStrategy(init, ConvStrategy::kAuto);
}

}  // namespace tandem::backend::cpu
