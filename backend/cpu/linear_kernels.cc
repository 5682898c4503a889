// linear and its backward ops on oneDNN inner-product primitives, created once per node
// and executed every step over the runtime's buffers.
//
// Inner product rather than matmul: bench/cpu_linear_bench measured both single-threaded
// on LeNet's and the ResNet head's shapes, and both dispatch to the same jit GEMM (equal
// times within noise); inner product also adds the bias in the forward primitive and
// computes the bias gradient in the weight-gradient primitive, where matmul would need a
// second pass over dy. All memory is plain row-major (x, y: nc; w: oi), the layout the
// runtime hands over, so no reorders run.

#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cpu/kernels.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {
namespace {

using dnnl::memory;

/// A plain f32 memory descriptor for a tensor of rank 1 or 2.
memory::desc plainDesc(const ir::TensorType& t) {
  memory::dims dims(t.shape.begin(), t.shape.end());
  return {dims, memory::data_type::f32,
          t.rank() == 1 ? memory::format_tag::a : memory::format_tag::ab};
}

absl::Status expectF32(const ir::Node& node) {
  for (size_t i = 0; i < node.numOperands(); ++i)
    if (ir::DType t = node.operand(i)->type().dtype; t != ir::DType::kF32)
      return absl::UnimplementedError(absl::StrCat(
          node.describe(), ": the CPU kernel supports f32 operands, not ", ir::dtypeName(t)));
  return absl::OkStatus();
}

/// Which kernel view binds to which primitive argument.
struct Binding {
  int arg;       // DNNL_ARG_*
  bool operand;  // in (true) or out (false)
  size_t index;  // position in that list
  memory::desc desc;
};

/// One oneDNN primitive whose memories are bound to kernel views on every run. The memory
/// objects are made once without a buffer; run() only swaps their data handles.
class PrimitiveKernel final : public Kernel {
 public:
  PrimitiveKernel(dnnl::primitive primitive, std::vector<Binding> bindings, CpuContext& ctx)
      : primitive_(std::move(primitive)), bindings_(std::move(bindings)), ctx_(ctx) {
    for (const Binding& b : bindings_)
      args_.emplace(b.arg, memory(b.desc, ctx_.engine(), DNNL_MEMORY_NONE));
  }

  void run(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    for (const Binding& b : bindings_)
      args_.at(b.arg).set_data_handle((b.operand ? in : out)[b.index].data);
    primitive_.execute(ctx_.stream(), args_);
    ctx_.stream().wait();
  }

 private:
  dnnl::primitive primitive_;
  std::vector<Binding> bindings_;
  CpuContext& ctx_;
  std::unordered_map<int, memory> args_;
};

/// Builds a kernel, turning oneDNN's exceptions (no implementation for these shapes, out
/// of memory) into a status that names the node.
template <typename Build>
KernelOr buildPrimitive(const KernelInit& init, Build build) {
  if (absl::Status s = expectF32(init.node); !s.ok()) return s;
  try {
    return build();
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrCat(init.node.describe(), ": oneDNN could not create the primitive: ", e.what()));
  }
}

const ir::TensorType& operandType(const ir::Node& node, size_t i) {
  return node.operand(i)->type();
}

/// The forward primitive descriptor for x[N,I], w[O,I] (+ b[O]) -> y[N,O]; the backward
/// primitives take it as their hint.
dnnl::inner_product_forward::primitive_desc forwardDesc(const memory::desc& x,
                                                        const memory::desc& w,
                                                        const memory::desc* b,
                                                        const memory::desc& y,
                                                        dnnl::engine& engine) {
  auto prop = dnnl::prop_kind::forward_training;
  if (b != nullptr) return {{prop, x, w, *b, y}, engine};
  return {{prop, x, w, y}, engine};
}

}  // namespace

// linear(x, w, b?) -> y = x w^T (+ b).
KernelOr makeLinearKernel(const KernelInit& init) {
  return buildPrimitive(init, [&]() -> KernelOr {
    const ir::Node& n = init.node;
    bool bias = n.numOperands() > 2;
    memory::desc x = plainDesc(operandType(n, 0)), w = plainDesc(operandType(n, 1)),
                 y = plainDesc(n.result()->type());
    memory::desc b = bias ? plainDesc(operandType(n, 2)) : memory::desc();
    auto pd = forwardDesc(x, w, bias ? &b : nullptr, y, init.ctx.engine());
    std::vector<Binding> bind{
        {DNNL_ARG_SRC, true, 0, x}, {DNNL_ARG_WEIGHTS, true, 1, w}, {DNNL_ARG_DST, false, 0, y}};
    if (bias) bind.push_back({DNNL_ARG_BIAS, true, 2, b});
    return std::make_unique<PrimitiveKernel>(dnnl::inner_product_forward(pd), std::move(bind),
                                             init.ctx);
  });
}

// linear_backward_data(dy, w) -> dx = dy w.
KernelOr makeLinearBackwardDataKernel(const KernelInit& init) {
  return buildPrimitive(init, [&]() -> KernelOr {
    const ir::Node& n = init.node;
    memory::desc dy = plainDesc(operandType(n, 0)), w = plainDesc(operandType(n, 1)),
                 dx = plainDesc(n.result()->type());
    auto hint = forwardDesc(dx, w, nullptr, dy, init.ctx.engine());
    dnnl::inner_product_backward_data::primitive_desc pd({dx, w, dy}, init.ctx.engine(), hint);
    std::vector<Binding> bind{{DNNL_ARG_DIFF_DST, true, 0, dy},
                              {DNNL_ARG_WEIGHTS, true, 1, w},
                              {DNNL_ARG_DIFF_SRC, false, 0, dx}};
    return std::make_unique<PrimitiveKernel>(dnnl::inner_product_backward_data(pd), std::move(bind),
                                             init.ctx);
  });
}

// linear_backward_weight(dy, x){bias} -> dw = dy^T x (and db = column sums of dy).
KernelOr makeLinearBackwardWeightKernel(const KernelInit& init) {
  return buildPrimitive(init, [&]() -> KernelOr {
    const ir::Node& n = init.node;
    bool bias = n.boolAttr("bias");
    memory::desc dy = plainDesc(operandType(n, 0)), x = plainDesc(operandType(n, 1)),
                 dw = plainDesc(n.result(0)->type());
    memory::desc db = bias ? plainDesc(n.result(1)->type()) : memory::desc();
    auto hint = forwardDesc(x, dw, bias ? &db : nullptr, dy, init.ctx.engine());
    using Desc = dnnl::inner_product_backward_weights::desc;
    Desc desc = bias ? Desc(x, dw, db, dy) : Desc(x, dw, dy);
    dnnl::inner_product_backward_weights::primitive_desc pd(desc, init.ctx.engine(), hint);
    std::vector<Binding> bind{{DNNL_ARG_DIFF_DST, true, 0, dy},
                              {DNNL_ARG_SRC, true, 1, x},
                              {DNNL_ARG_DIFF_WEIGHTS, false, 0, dw}};
    if (bias) bind.push_back({DNNL_ARG_DIFF_BIAS, false, 1, db});
    return std::make_unique<PrimitiveKernel>(dnnl::inner_product_backward_weights(pd),
                                             std::move(bind), init.ctx);
  });
}

}  // namespace tandem::backend::cpu
