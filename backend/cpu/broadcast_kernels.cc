// scale, add_bcast and mul_bcast. scale is an own loop, factor * x: memory bound, so
// oneDNN's eltwise_linear bought nothing, and its alpha * x + 0 turned a -0 product into
// +0 where PyTorch's x * c keeps it. The broadcasting ops are oneDNN's binary primitive,
// which takes f32 and bf16 operands side by side (a master weight beside bf16
// activations) and computes in float, rounding a bf16 result once. oneDNN 2.6's binary
// broadcasts its second source only: the operand of the result's shape goes first (add
// and mul commute). When neither has it ([N,1] * [1,D]) an own loop over
// broadcast_index.h's maps does the work, the same arithmetic the CUDA kernel runs.

#include <memory>
#include <utility>

#include "backend/bf16.h"
#include "backend/broadcast_index.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/vector_loops.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

/// y = factor * x in float (a bf16 result rounded once), PyTorch's x * c to the bit.
template <typename T>
TANDEM_VECTOR_LOOPS void scaleLoop(const T* x, T* y, float factor, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = factor * v;
  }
}

template <typename T>
class ScaleKernel final : public CpuKernel {
 public:
  explicit ScaleKernel(float factor) : factor_(factor) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    scaleLoop(in[0].as<T>(), out[0].as<T>(), factor_, out[0].numElements());
  }

 private:
  float factor_;
};

KernelOr scaleKernel(const KernelInit& init) {
  const auto factor = static_cast<float>(init.node.floatAttr("factor"));
  return withFloatType(init.node.result()->type().dtype, [&](auto tag) -> KernelOr {
    return std::make_unique<ScaleKernel<decltype(tag)>>(factor);
  });
}

/// `t` with leading 1s up to `rank` (oneDNN's binary takes sources of one rank).
dnnl::memory::desc alignedPlainDesc(const ir::TensorType& t, size_t rank) {
  ir::TensorType padded = t;
  padded.shape.insert(padded.shape.begin(), rank - t.shape.size(), 1);
  return plainDesc(padded);
}

enum class BinaryOp { kAdd, kMul };

template <BinaryOp kOp>
float apply(float a, float b) {
  return kOp == BinaryOp::kAdd ? a + b : a * b;
}

/// Neither operand has the result's shape: every element reads both through their maps.
template <BinaryOp kOp, typename A, typename B, typename Y>
TANDEM_VECTOR_LOOPS void bothBroadcast(const A* a, const B* b, Y* y, const BroadcastMap& ma,
                                       const BroadcastMap& mb, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = apply<kOp>(static_cast<float>(a[ma.source(i)]), static_cast<float>(b[mb.source(i)]));
}

template <BinaryOp kOp>
class BothBroadcastKernel final : public CpuKernel {
 public:
  BothBroadcastKernel(BroadcastMap a, BroadcastMap b, ir::DType ta, ir::DType tb, ir::DType ty)
      : a_(a), b_(b), ta_(ta), tb_(tb), ty_(ty) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    withFloatType(ta_, [&](auto ta) {
      withFloatType(tb_, [&](auto tb) {
        withFloatType(ty_, [&](auto ty) {
          bothBroadcast<kOp>(in[0].as<decltype(ta)>(), in[1].as<decltype(tb)>(),
                             out[0].as<decltype(ty)>(), a_, b_, out[0].numElements());
        });
      });
    });
  }

 private:
  BroadcastMap a_, b_;
  ir::DType ta_, tb_, ty_;
};

template <BinaryOp kOp>
KernelOr broadcastKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.result()->type();
  const ir::TensorType &a = n.operand(0)->type(), &b = n.operand(1)->type();
  const size_t full = a.shape == y.shape ? 0 : b.shape == y.shape ? 1 : 2;
  if (full == 2) {
    // oneDNN 2.6 broadcasts src1 only; this case stretches both.
    ASSIGN_OR_RETURN(BroadcastMap ma, broadcastMap(a.shape, y.shape, n.describe()));
    ASSIGN_OR_RETURN(BroadcastMap mb, broadcastMap(b.shape, y.shape, n.describe()));
    return std::make_unique<BothBroadcastKernel<kOp>>(ma, mb, a.dtype, b.dtype, y.dtype);
  }
  const size_t other = 1 - full;
  try {
    DnnlProgram p(init.ctx);
    const auto src0 = plainDesc(n.operand(full)->type());
    const auto src1 = alignedPlainDesc(n.operand(other)->type(), y.shape.size());
    const auto dst = plainDesc(y);
    const auto alg =
        kOp == BinaryOp::kAdd ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul;
    const dnnl::binary::primitive_desc pd({alg, src0, src1, dst}, userScratchpadAttr(),
                                          init.ctx.engine());
    p.add(pd, dnnl::binary(pd),
          {{DNNL_ARG_SRC_0, p.input(full, src0)},
           {DNNL_ARG_SRC_1, p.input(other, src1)},
           {DNNL_ARG_DST, p.output(0, dst)}});
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(n, "binary primitive", e);
  }
}

}  // namespace

KernelOr makeScaleKernel(const KernelInit& init) { return scaleKernel(init); }
KernelOr makeAddBcastKernel(const KernelInit& init) {
  return broadcastKernel<BinaryOp::kAdd>(init);
}
KernelOr makeMulBcastKernel(const KernelInit& init) {
  return broadcastKernel<BinaryOp::kMul>(init);
}

}  // namespace tandem::backend::cpu
