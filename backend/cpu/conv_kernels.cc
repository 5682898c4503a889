// conv2d and its two backward ops on oneDNN convolution primitives.
//
// Tensors between kernels are plain NCHW/OIHW. oneDNN's fast convolutions want blocked
// layouts (nChw8c, OIhw8i8o on AVX2); given plain tensors it falls back to im2col + GEMM
// or, for few input channels, a JIT kernel that reads NCHW directly. The plan's algorithm
// (choose-algorithms, by conv_choice.h's measured rule) picks, per pass and shape, among "plain
// tensors as they are", "blocked layouts with reorders inside the kernel", for 3x3 stride-1
// convolutions on AVX-512 Winograd F(4x4, 3x3) with the same reorders, and our own im2col + oneDNN
// matmul over chunks of images (gemm_conv.h); bench/cpu_kernels_bench.cc measures all four.

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/gemm_conv.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/tap_conv.h"
#include "backend/cpu/target_info.h"
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
  ConvGeometry geo;  // its pass, groups and the rest (conv_choice.h)
  ir::TensorType x, w, y;
  memory::dims strides, pad_l, pad_r;  // geo's, as oneDNN takes them
};

ConvShape convShape(const ir::Node& n, const ir::TensorType& x, const ir::TensorType& w,
                    const ir::TensorType& y) {
  const ConvGeometry g = *convGeometry(n);
  // The end padding is what the last window reaches (ConvGeometry), which keeps oneDNN's
  // shape check exact.
  return {g,
          x,
          {x.dtype, w.shape},
          y,
          {g.stride_h, g.stride_w},
          {g.pad_h, g.pad_w},
          {g.pad_end_h, g.pad_end_w}};
}

/// A filter of `s` in dtype `dt` as oneDNN's convolutions take it: [O, C, K, K], or with
/// groups [G, O/G, C/G, K, K], whose plain layout (goihw) is the IR's [O, C/G, K, K] bytes
/// as they are. Plain, or format `any` for the primitive to choose.
memory::desc filterDesc(const ConvShape& s, ir::DType dt, bool plain) {
  const ir::Shape& w = s.w.shape;
  const int64_t groups = s.geo.groups;
  memory::dims dims = groups > 1 ? memory::dims{groups, w[0] / groups, w[1], w[2], w[3]}
                                 : memory::dims{w[0], w[1], w[2], w[3]};
  using tag = memory::format_tag;
  return memory::desc(dims, dnnlType(dt), !plain ? tag::any : groups > 1 ? tag::goihw : tag::oihw);
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

/// The operands whose NaN or infinity the strategy `st` of `s`'s pass gets wrong, against
/// PyTorch's direct convolution (tests/backend/nonfinite_ops_test.cc):
///  - Winograd mixes a tile's inputs (and a filter's taps) in its transforms, so a NaN
///    reaches every output of its 4x4 tile and an inf becomes NaN (inf - inf): the two
///    float inputs, operands 0 and 1 of all three passes;
///  - GEMM over plain tensors (oneDNN's, or kGemm's) multiplies the zero padding too
///    (im2col), and 0 times a NaN or inf weight (forward) or output gradient (backward
///    filter) is NaN, where direct convolution never touches the padding: operand 1
///    forward, 0 backward filter.
/// The blocked direct kernel gets them right.
std::vector<size_t> nonFiniteHazards(ConvStrategy st, const ConvShape& s) {
  if (st == ConvStrategy::kWinograd) return {0, 1};
  auto padded = [](const memory::dims& d) {
    return std::any_of(d.begin(), d.end(), [](memory::dim v) { return v > 0; });
  };
  const bool over_padding = st == ConvStrategy::kPlain || st == ConvStrategy::kGemm;
  if (!over_padding || !(padded(s.pad_l) || padded(s.pad_r))) return {};
  switch (s.geo.pass) {
    case ConvPass::kForward:
      return {1};
    case ConvPass::kBackwardFilter:
      return {0};
    case ConvPass::kBackwardData:
      break;  // col2im adds only the columns of real pixels
  }
  return {};
}

/// Whether kGemm can run the convolution of `init` with the layouts it is made for
/// (gemmRuns).
bool gemmApplies(const KernelInit& init, const ConvShape& s) {
  return gemmRuns(init.node, s.geo, [&](const ir::Value& v) {
    return init.isBlocked(&v) ? ir::ActivationLayout::kChannelBlocked
                              : ir::ActivationLayout::kPlain;
  });
}

/// Whether kTaps can run the pass of `init` here (tap_conv.h).
bool tapsRun(const KernelInit& init, const ConvShape& s) {
  return avx512Runs() && tapsApply(s.geo) && gemmApplies(init, s);
}

/// The strategy the kernel of `init` runs: `requested` where a test or benchmark forces
/// one, else the plan's (choose-algorithms), else the rule for the node as it is made.
/// A device set to conv_algorithm=direct runs no Winograd, whatever a plan says.
ConvStrategy resolveStrategy(const KernelInit& init, ConvStrategy requested, const ConvShape& s) {
  if (requested != ConvStrategy::kAuto) return requested;
  const std::optional<ConvStrategy> planned = strategyNamed(init.algorithm);
  if (planned && (*planned != ConvStrategy::kWinograd || init.ctx.winograd())) return *planned;
  return chooseConvStrategy(s.geo, gemmApplies(init, s),
                            {.avx512 = hostHasAvx512Core(), .winograd = init.ctx.winograd()});
}

/// The batch and window of `s` as gemm_conv.h takes them.
GemmConvShape gemmShape(const ConvShape& s) {
  const ConvGeometry& g = s.geo;
  return {g.batch,
          g.out_channels,
          {.c = g.channels,
           .h = g.height,
           .w = g.width,
           .kh = g.kernel_h,
           .kw = g.kernel_w,
           .oh = g.out_height,
           .ow = g.out_width,
           .stride_h = g.stride_h,
           .stride_w = g.stride_w,
           .pad_h = g.pad_h,
           .pad_w = g.pad_w}};
}

/// kGemm's kernel, `gemm(shape)`, with the blocked direct program of `build` for runs whose
/// operands it would mishandle (nonFiniteHazards).
template <typename Build, typename Gemm>
KernelOr buildGemmConv(const ConvShape& s, Build build, Gemm gemm) {
  ASSIGN_OR_RETURN(std::unique_ptr<GemmConvKernel> k, gemm(gemmShape(s)));
  std::vector<size_t> watched = nonFiniteHazards(ConvStrategy::kGemm, s);
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
                   const ConvShape& s, Build build, Gemm gemm) {
  const ir::Node& n = init.node;
  if (strategy == ConvStrategy::kGemm) {
    if (gemmApplies(init, s)) return buildGemmConv(s, build, gemm);
    strategy = directStrategy(s.geo);
  }
  // kTaps is the forward's and the backward filter's, where it runs (their factories).
  if (strategy == ConvStrategy::kTaps) strategy = directStrategy(s.geo);
  std::optional<DnnlProgram> fast;
  if (strategy == ConvStrategy::kWinograd) {
    if (winogradApplies(s.geo)) {
      try {
        fast.emplace(build(strategy));
      } catch (const dnnl::error&) {
      }
    }
    if (!fast.has_value()) strategy = directStrategy(s.geo);
  }
  if (!fast.has_value()) {
    try {
      fast.emplace(build(strategy));
    } catch (const dnnl::error& e) {
      return dnnlFailure(n, what, e);
    }
  }
  std::vector<size_t> watched = nonFiniteHazards(strategy, s);
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
  strategy = resolveStrategy(init, strategy, s);
  if (strategy == ConvStrategy::kTaps && tapsRun(init, s)) {
    const GemmConvShape g = gemmShape(s);
    return makeTapForwardKernel(g.window, g.n, g.o, bias);
  }
  auto gemm = [&](const GemmConvShape& g) {
    return makeGemmConvForward(init.ctx, g, bias, n.describe());
  };
  return buildConv(
      init, "convolution", strategy, s,
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
  strategy = resolveStrategy(init, strategy, s);
  auto gemm = [&](const GemmConvShape& g) {
    return makeGemmConvBackwardData(init.ctx, g, n.describe());
  };
  return buildConv(
      init, "convolution backward-data", strategy, s,
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
  strategy = resolveStrategy(init, strategy, s);
  if (strategy == ConvStrategy::kTaps && tapsRun(init, s)) {
    const GemmConvShape g = gemmShape(s);
    return makeTapFilterKernel(g.window, g.n, g.o, bias);
  }
  auto gemm = [&](const GemmConvShape& g) {
    return makeGemmConvBackwardFilter(init.ctx, g, bias, n.describe());
  };
  return buildConv(
      init, "convolution backward-filter", strategy, s,
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
