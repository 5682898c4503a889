// conv2d and its two backward ops on oneDNN convolution primitives.
//
// Tensors between kernels are plain NCHW/OIHW. oneDNN's fast convolutions want blocked
// layouts (nChw8c, OIhw8i8o on AVX2); given plain tensors it falls back to im2col + GEMM
// or, for few input channels, a JIT kernel that reads NCHW directly. chooseStrategy
// picks, per pass and shape, the cheaper of "plain tensors as they are" and "blocked
// layouts with reorders inside the kernel"; bench/cpu_kernels_bench.cc measures both.

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {
namespace {

using dnnl::algorithm;
using dnnl::convolution_backward_data;
using dnnl::convolution_backward_weights;
using dnnl::convolution_forward;
using dnnl::memory;
using dnnl::prop_kind;

/// The tensors of one convolution and its window geometry, read off any of the three ops.
struct ConvShape {
  ir::TensorType x, w, y;
  memory::dims strides, pad_l, pad_r;
};

ConvShape convShape(const ir::Node& n, const ir::TensorType& x, const ir::TensorType& w,
                    const ir::TensorType& y) {
  int64_t stride = n.intAttr("stride"), pad = n.intAttr("pad");
  // The IR rounds the output extent down, so with a symmetric pad the last rows of
  // bottom/right padding may never be read: give oneDNN the end padding the last window
  // actually reaches (never negative), which keeps its shape check exact.
  auto endPad = [&](size_t axis) {
    int64_t reach = (y.shape[axis] - 1) * stride + w.shape[axis] - x.shape[axis] - pad;
    return std::clamp<int64_t>(reach, 0, pad);
  };
  return {x, w, y, {stride, stride}, {pad, pad}, {endPad(2), endPad(3)}};
}

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };

/// The strategy for one pass (kAuto resolved). Measured with one thread on AVX2
/// (bench/cpu_kernels_bench.cc, LeNet at N=128 and ResNet-18 at N=32, best of 4):
///  - 1x1 filters: plain everywhere (GEMM needs no im2col then; blocked 10-20% slower).
///  - forward: the blocked JIT kernel wins 23-43% from 20 input channels on (LeNet's
///    conv2, ResNet's 3x3s) but only ties at 4x4 outputs; with one input channel GEMM
///    on the plain tensors wins by 10-20%.
///  - backward data: blocked wins 23-72% from 64 input channels; below that the channel
///    blocks of dx are mostly padding (1 channel: 5x slower, LeNet's 20: 8% slower).
///  - backward filter: im2col + GEMM wins (by up to 2x for one input channel) unless one
///    image's im2col buffer outgrows the L2 cache (ResNet's 64 channels at 28x28:
///    blocked 28% faster).
ConvStrategy chooseStrategy(ConvStrategy requested, ConvPass pass, const ConvShape& s) {
  if (requested != ConvStrategy::kAuto) return requested;
  int64_t c = s.x.shape[1], k = s.w.shape[2];
  int64_t out_hw = s.y.shape[2] * s.y.shape[3];
  if (k == 1) return ConvStrategy::kPlain;
  bool blocked = false;
  switch (pass) {
    case ConvPass::kForward:
      blocked = c >= 8 && out_hw >= 49;
      break;
    case ConvPass::kBackwardData:
      blocked = c >= 32;
      break;
    case ConvPass::kBackwardFilter:
      blocked = c * k * k * out_hw * int64_t{sizeof(float)} > (int64_t{1} << 20);
      break;
  }
  return blocked ? ConvStrategy::kBlocked : ConvStrategy::kPlain;
}

memory::desc layoutDesc(bool blocked, const ir::TensorType& t) {
  return blocked ? anyDesc(t) : plainDesc(t);
}

/// The forward primitive descriptor (also the hint the backward ones need).
convolution_forward::primitive_desc forwardPd(const ConvShape& s, bool blocked,
                                              const memory::desc& bias, dnnl::engine& engine) {
  convolution_forward::desc d(prop_kind::forward_training, algorithm::convolution_direct,
                              layoutDesc(blocked, s.x), layoutDesc(blocked, s.w), bias,
                              layoutDesc(blocked, s.y), s.strides, s.pad_l, s.pad_r);
  return convolution_forward::primitive_desc(d, userScratchpadAttr(), engine);
}

}  // namespace

KernelOr makeConv2dKernelWithStrategy(const KernelInit& init, ConvStrategy strategy) {
  const ir::Node& n = init.node;  // x, w, b? -> y
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  ConvShape s = convShape(n, n.operand(0)->type(), n.operand(1)->type(), n.result()->type());
  bool bias = n.numOperands() > 2;
  strategy = chooseStrategy(strategy, ConvPass::kForward, s);
  try {
    DnnlProgram p(init.ctx);
    memory::desc bias_md = bias ? plainDesc(n.operand(2)->type()) : memory::desc();
    auto pd = forwardPd(s, strategy == ConvStrategy::kBlocked, bias_md, p.engine());
    std::vector<std::pair<int, DnnlProgram::Slot>> args{
        {DNNL_ARG_SRC, p.inputAs(p.input(0, s.x), pd.src_desc())},
        {DNNL_ARG_WEIGHTS, p.inputAs(p.input(1, s.w), pd.weights_desc())}};
    if (bias) args.emplace_back(DNNL_ARG_BIAS, p.input(2, n.operand(2)->type()));
    DnnlProgram::Slot y = p.output(0, s.y), y_prim = p.outputAs(y, pd.dst_desc());
    args.emplace_back(DNNL_ARG_DST, y_prim);
    p.add(pd, convolution_forward(pd), args);
    p.storeTo(y_prim, y);
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(n, "convolution", e);
  }
}

KernelOr makeConv2dBackwardDataKernelWithStrategy(const KernelInit& init, ConvStrategy strategy) {
  const ir::Node& n = init.node;  // dy, w, x -> dx
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  ConvShape s = convShape(n, n.operand(2)->type(), n.operand(1)->type(), n.operand(0)->type());
  strategy = chooseStrategy(strategy, ConvPass::kBackwardData, s);
  try {
    DnnlProgram p(init.ctx);
    bool blocked = strategy == ConvStrategy::kBlocked;
    auto hint = forwardPd(s, blocked, memory::desc(), p.engine());
    convolution_backward_data::desc d(algorithm::convolution_direct, layoutDesc(blocked, s.x),
                                      layoutDesc(blocked, s.w), layoutDesc(blocked, s.y), s.strides,
                                      s.pad_l, s.pad_r);
    convolution_backward_data::primitive_desc pd(d, userScratchpadAttr(), p.engine(), hint);
    DnnlProgram::Slot dy = p.inputAs(p.input(0, s.y), pd.diff_dst_desc());
    DnnlProgram::Slot w = p.inputAs(p.input(1, s.w), pd.weights_desc());
    DnnlProgram::Slot dx = p.output(0, s.x), dx_prim = p.outputAs(dx, pd.diff_src_desc());
    p.add(pd, convolution_backward_data(pd),
          {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx_prim}});
    p.storeTo(dx_prim, dx);
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(n, "convolution backward-data", e);
  }
}

KernelOr makeConv2dBackwardFilterKernelWithStrategy(const KernelInit& init, ConvStrategy strategy) {
  const ir::Node& n = init.node;  // dy, x, w -> dw, db?
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  ConvShape s = convShape(n, n.operand(1)->type(), n.operand(2)->type(), n.operand(0)->type());
  bool bias = n.boolAttr("bias");
  strategy = chooseStrategy(strategy, ConvPass::kBackwardFilter, s);
  try {
    DnnlProgram p(init.ctx);
    bool blocked = strategy == ConvStrategy::kBlocked;
    memory::desc bias_md = bias ? plainDesc(n.result(1)->type()) : memory::desc();
    auto hint = forwardPd(s, blocked, bias_md, p.engine());
    convolution_backward_weights::desc d(algorithm::convolution_direct, layoutDesc(blocked, s.x),
                                         layoutDesc(blocked, s.w), bias_md,
                                         layoutDesc(blocked, s.y), s.strides, s.pad_l, s.pad_r);
    convolution_backward_weights::primitive_desc pd(d, userScratchpadAttr(), p.engine(), hint);
    DnnlProgram::Slot dw = p.output(0, s.w), dw_prim = p.outputAs(dw, pd.diff_weights_desc());
    std::vector<std::pair<int, DnnlProgram::Slot>> args{
        {DNNL_ARG_DIFF_DST, p.inputAs(p.input(0, s.y), pd.diff_dst_desc())},
        {DNNL_ARG_SRC, p.inputAs(p.input(1, s.x), pd.src_desc())},
        {DNNL_ARG_DIFF_WEIGHTS, dw_prim}};
    if (bias) args.emplace_back(DNNL_ARG_DIFF_BIAS, p.output(1, n.result(1)->type()));
    p.add(pd, convolution_backward_weights(pd), args);
    p.storeTo(dw_prim, dw);
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(n, "convolution backward-filter", e);
  }
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
