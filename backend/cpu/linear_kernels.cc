// linear and its backward ops on oneDNN inner-product primitives, created once per node
// and executed every step over the runtime's buffers.
//
// Inner product rather than matmul: bench/cpu_linear_bench measured both single-threaded
// on LeNet's and the ResNet head's shapes, and both dispatch to the same jit GEMM (equal
// times within noise); inner product also adds the bias in the forward primitive and
// computes the bias gradient in the weight-gradient primitive, where matmul would need a
// second pass over dy. All memory is plain row-major (x, y: nc; w: oi), the layout the
// runtime hands over, so no reorders run, except to convert f32 master weights for a
// bf16 product (mixed precision).

#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/kernels.h"
#include "ir/op_views.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {
namespace {

using dnnl::memory;

/// The forward primitive descriptor for x[N,I], w[O,I] (+ b[O]) -> y[N,O]; the backward
/// primitives take it as their hint.
dnnl::inner_product_forward::primitive_desc forwardDesc(const memory::desc& x,
                                                        const memory::desc& w,
                                                        const memory::desc* b,
                                                        const memory::desc& y,
                                                        dnnl::engine& engine) {
  auto prop = dnnl::prop_kind::forward_training;
  using Desc = dnnl::inner_product_forward::desc;
  return {b != nullptr ? Desc(prop, x, w, *b, y) : Desc(prop, x, w, y), userScratchpadAttr(),
          engine};
}

/// A kernel that is one inner-product program; oneDNN's exceptions (no implementation
/// for these shapes, out of memory) become a status naming the node.
template <typename Build>
KernelOr buildProgram(const KernelInit& init, Build build) {
  try {
    DnnlProgram p(init.ctx);
    build(p);
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(init.node, "inner product", e);
  }
}

/// The weight as the primitive takes it: in the activations' dtype `act`. f32 master
/// weights beside bf16 activations are converted by a reorder into a temporary (oneDNN's
/// bf16 inner product wants bf16 weights; the bias may stay f32).
DnnlProgram::Slot weightIn(DnnlProgram& p, size_t operand, const ir::TensorType& w,
                           ir::DType act) {
  return p.inputAs(p.input(operand, w), plainDesc({act, w.shape}));
}

}  // namespace

// linear(x, w, b?) -> y = x w^T (+ b).
KernelOr makeLinearKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  return buildProgram(init, [&](DnnlProgram& p) {
    bool bias = n.numOperands() > 2;
    memory::desc b = bias ? plainDesc(n.operand(2)->type()) : memory::desc();
    const ir::TensorType &x = n.operand(0)->type(), &w = n.operand(1)->type();
    auto pd = forwardDesc(plainDesc(x), plainDesc({x.dtype, w.shape}), bias ? &b : nullptr,
                          plainDesc(n.result()->type()), p.engine());
    std::vector<std::pair<int, DnnlProgram::Slot>> args{
        {DNNL_ARG_SRC, p.input(0, x)},
        {DNNL_ARG_WEIGHTS, weightIn(p, 1, w, x.dtype)},
        {DNNL_ARG_DST, p.output(0, n.result()->type())}};
    if (bias) args.emplace_back(DNNL_ARG_BIAS, p.input(2, n.operand(2)->type()));
    p.add(pd, dnnl::inner_product_forward(pd), args);
  });
}

// linear_backward_data(dy, w) -> dx = dy w.
KernelOr makeLinearBackwardDataKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  return buildProgram(init, [&](DnnlProgram& p) {
    const ir::TensorType &dy_t = n.operand(0)->type(), &w_t = n.operand(1)->type();
    memory::desc dy = plainDesc(dy_t), w = plainDesc({dy_t.dtype, w_t.shape}),
                 dx = plainDesc(n.result()->type());
    auto hint = forwardDesc(dx, w, nullptr, dy, p.engine());
    dnnl::inner_product_backward_data::primitive_desc pd({dx, w, dy}, userScratchpadAttr(),
                                                         p.engine(), hint);
    DnnlProgram::Slot w_in = weightIn(p, 1, w_t, dy_t.dtype);
    p.add(pd, dnnl::inner_product_backward_data(pd),
          {{DNNL_ARG_DIFF_DST, p.input(0, dy_t)},
           {DNNL_ARG_WEIGHTS, w_in},
           {DNNL_ARG_DIFF_SRC, p.output(0, n.result()->type())}});
  });
}

// linear_backward_weight(dy, x){bias} -> dw = dy^T x (and db = column sums of dy).
KernelOr makeLinearBackwardWeightKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  return buildProgram(init, [&](DnnlProgram& p) {
    bool bias = ir::attr::bias(n);
    memory::desc dy = plainDesc(n.operand(0)->type()), x = plainDesc(n.operand(1)->type()),
                 dw = plainDesc(n.result(0)->type());
    memory::desc db = bias ? plainDesc(n.result(1)->type()) : memory::desc();
    auto hint = forwardDesc(x, dw, bias ? &db : nullptr, dy, p.engine());
    using Desc = dnnl::inner_product_backward_weights::desc;
    Desc desc = bias ? Desc(x, dw, db, dy) : Desc(x, dw, dy);
    dnnl::inner_product_backward_weights::primitive_desc pd(desc, userScratchpadAttr(), p.engine(),
                                                            hint);
    std::vector<std::pair<int, DnnlProgram::Slot>> args{
        {DNNL_ARG_DIFF_DST, p.input(0, n.operand(0)->type())},
        {DNNL_ARG_SRC, p.input(1, n.operand(1)->type())},
        {DNNL_ARG_DIFF_WEIGHTS, p.output(0, n.result(0)->type())}};
    if (bias) args.emplace_back(DNNL_ARG_DIFF_BIAS, p.output(1, n.result(1)->type()));
    p.add(pd, dnnl::inner_product_backward_weights(pd), args);
  });
}

}  // namespace tandem::backend::cpu
