// relu, relu_backward, add and cast: plain loops over contiguous arrays. They are memory bound,
// so a oneDNN eltwise primitive would buy nothing over what the compiler vectorizes. Unary
// ops with transcendental math (sigmoid, ...) are oneDNN eltwise primitives instead: its
// vectorized exp and friends, f32 and bf16, and the backward from the output where the
// algorithm allows. Every other op of class unary_elementwise (ir/ops.td) is a loop over
// its per-element math, shared with CUDA (backend/unary_math.h): a new one needs no
// line here.
// No __restrict: each element reads only its own position, so a result may share an
// operand's buffer (in-place reuse by a memory planner) and the loops stay correct.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/vector_loops.h"
#include "backend/narrow_ids.h"
#include "backend/unary_math.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

// PyTorch's clamp_min(x, 0): a NaN stays NaN and -0 stays -0 (`x > 0 ? x : 0` made both
// +0). Written as std::max(x, 0) is, x < 0 ? 0 : x, which GCC turns into one maxps with
// the operands in the order that returns x for a NaN.
template <typename T>
TANDEM_VECTOR_LOOPS void relu(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

// y is relu's output: y > 0 exactly where x > 0, so the mask needs no copy of x. PyTorch's
// threshold_backward(dy, y, 0), y <= 0 ? 0 : dy: a NaN output passes dy on.
template <typename T>
TANDEM_VECTOR_LOOPS void reluBackward(const T* dy, const T* y, T* dx, int64_t n) {
  // dy loaded either way: the conditional load of `y > 0 ? dy : 0` kept the loop scalar.
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = static_cast<float>(y[i]) <= 0.0f ? 0.0f : g;
  }
}

// In float and rounded once for bf16, as oneDNN's bf16 eltwise and binary ops do.
template <typename T>
TANDEM_VECTOR_LOOPS void add(const T* a, const T* b, T* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

// f32 -> bf16 rounds to nearest even; bf16 -> f32 is exact.
template <typename From, typename To>
TANDEM_VECTOR_LOOPS void cast(const From* x, To* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
}

template <typename T>
class ReluKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    relu(in[0].as<T>(), out[0].as<T>(), out[0].numElements());
  }
};

// i64 ids and labels to i32 (backend/narrow_ids.h says why it saturates).
TANDEM_VECTOR_LOOPS void narrowIds(const int64_t* x, int32_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = narrowId(x[i]);
}

class NarrowIdsKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    narrowIds(in[0].as<int64_t>(), out[0].i32(), out[0].numElements());
  }
};

template <typename T>
class ReluBackwardKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    reluBackward(in[0].as<T>(), in[1].as<T>(), out[0].as<T>(), out[0].numElements());
  }
};

template <typename T>
class AddKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    add(in[0].as<T>(), in[1].as<T>(), out[0].as<T>(), out[0].numElements());
  }
};

template <typename From, typename To>
class CastKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    cast(in[0].as<From>(), out[0].as<To>(), out[0].numElements());
  }
};

// y = Math::forward(x) and dx = Math::backward(dy, v) per element, in float (bf16 widened
// exactly and the result rounded once, as CUDA's kernels over the same math).
template <typename Math, typename T>
class MathUnaryKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T* x = in[0].as<T>();
    T* y = out[0].as<T>();
    const int64_t n = out[0].numElements();
    // Over the device's threads (--threads-per-device) once the tensor is worth it: every
    // element on its own, so the same bits however it is cut.
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) y[i] = Math::forward(static_cast<float>(x[i]));
  }
};

template <typename Math, typename T>
class MathUnaryBackwardKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T* dy = in[0].as<T>();
    const T* v = in[1].as<T>();
    T* dx = out[0].as<T>();
    const int64_t n = out[0].numElements();
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      dx[i] = Math::backward(static_cast<float>(dy[i]), static_cast<float>(v[i]));
  }
};

/// clip (x -> y) and clip_backward (dy, x -> dx) with bounds [lo, hi]: the shared math of
/// backend/unary_math.h, in float.
template <typename T>
class ClipKernel final : public CpuKernel {
 public:
  ClipKernel(bool backward, float lo, float hi) : backward_(backward), lo_(lo), hi_(hi) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    T* y = out[0].as<T>();
    const int64_t n = out[0].numElements();
    if (!backward_) {
      const T* x = in[0].as<T>();
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) y[i] = clipValue(static_cast<float>(x[i]), lo_, hi_);
      return;
    }
    const T* dy = in[0].as<T>();
    const T* x = in[1].as<T>();
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      y[i] = clipBackwardValue(static_cast<float>(dy[i]), static_cast<float>(x[i]), lo_, hi_);
  }

 private:
  bool backward_;
  float lo_, hi_;
};

KernelOr clipKernel(const KernelInit& init, bool backward) {
  const auto lo = static_cast<float>(ir::attr::min(init.node));
  const auto hi = static_cast<float>(ir::attr::max(init.node));
  return withFloatType(init.node.result()->type().dtype, [&](auto tag) -> KernelOr {
    return std::make_unique<ClipKernel<decltype(tag)>>(backward, lo, hi);
  });
}

// oneDNN's algorithms of the ops below ("use_dst": the backward op reads the output).
constexpr dnnl::algorithm kLogistic = dnnl::algorithm::eltwise_logistic_use_dst_for_bwd;
constexpr dnnl::algorithm kGeluErf = dnnl::algorithm::eltwise_gelu_erf;
constexpr dnnl::algorithm kGeluTanh = dnnl::algorithm::eltwise_gelu_tanh;
constexpr dnnl::algorithm kTanh = dnnl::algorithm::eltwise_tanh_use_dst_for_bwd;

/// Whether oneDNN's backward of `alg` reads the forward output (dst) rather than its input.
constexpr bool backwardReadsOutput(dnnl::algorithm alg) {
  using dnnl::algorithm;
  return alg == algorithm::eltwise_logistic_use_dst_for_bwd ||
         alg == algorithm::eltwise_tanh_use_dst_for_bwd ||
         alg == algorithm::eltwise_relu_use_dst_for_bwd ||
         alg == algorithm::eltwise_elu_use_dst_for_bwd ||
         alg == algorithm::eltwise_sqrt_use_dst_for_bwd ||
         alg == algorithm::eltwise_exp_use_dst_for_bwd;
}

/// A unary op y = f(x) as the oneDNN eltwise primitive `kAlg`, in the result's dtype.
template <dnnl::algorithm kAlg>
KernelOr eltwiseKernel(const KernelInit& init) {
  try {
    DnnlProgram p(init.ctx);
    const dnnl::memory::desc md = plainDesc(init.node.result()->type());
    const dnnl::eltwise_forward::primitive_desc pd({dnnl::prop_kind::forward_training, kAlg, md},
                                                   userScratchpadAttr(), init.ctx.engine());
    p.add(pd, dnnl::eltwise_forward(pd),
          {{DNNL_ARG_SRC, p.input(0, md)}, {DNNL_ARG_DST, p.output(0, md)}});
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(init.node, "eltwise primitive", e);
  }
}

/// Its backward op dx(dy, v): v is the forward output where backwardReadsOutput(kAlg) (the
/// spec's backward op then reads y), else the input.
template <dnnl::algorithm kAlg>
KernelOr eltwiseBackwardKernel(const KernelInit& init) {
  try {
    DnnlProgram p(init.ctx);
    const dnnl::memory::desc md = plainDesc(init.node.result()->type());
    const dnnl::eltwise_forward::primitive_desc hint({dnnl::prop_kind::forward_training, kAlg, md},
                                                     init.ctx.engine());
    const dnnl::eltwise_backward::primitive_desc pd({kAlg, md, md}, userScratchpadAttr(),
                                                    init.ctx.engine(), hint);
    p.add(pd, dnnl::eltwise_backward(pd),
          {{DNNL_ARG_DIFF_DST, p.input(0, md)},
           {backwardReadsOutput(kAlg) ? DNNL_ARG_DST : DNNL_ARG_SRC, p.input(1, md)},
           {DNNL_ARG_DIFF_SRC, p.output(0, md)}});
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(init.node, "eltwise backward primitive", e);
  }
}

}  // namespace

namespace {

/// The kernels of unary_elementwise op kOp: by default loops over its shared math ...
template <ir::Op kOp, typename Math>
struct UnaryKernels {
  static KernelOr forward(const KernelInit& init) {
    return withFloatType(init.node.result()->type().dtype, [](auto tag) -> KernelOr {
      return std::make_unique<MathUnaryKernel<Math, decltype(tag)>>();
    });
  }
  static KernelOr backward(const KernelInit& init) {
    return withFloatType(init.node.result()->type().dtype, [](auto tag) -> KernelOr {
      return std::make_unique<MathUnaryBackwardKernel<Math, decltype(tag)>>();
    });
  }
};

/// ... and, for the ones with transcendental math, oneDNN eltwise primitive kAlg.
/// Which operand oneDNN's backward reads is the algorithm's; the spec's `grad reads` says
/// which one the node holds, so the two must agree.
template <dnnl::algorithm kAlg>
struct EltwiseKernels {
  static KernelOr forward(const KernelInit& i) { return eltwiseKernel<kAlg>(i); }
  static KernelOr backward(const KernelInit& i) {
    const ir::GradPair* pair = ir::opInfo(i.node.op()).grad_pair;
    if (pair == nullptr || backwardReadsOutput(kAlg) != (pair->reads == ir::GradReads::kOutput))
      return absl::InternalError(absl::StrCat("node ", i.node.describe(),
                                              ": the CPU's oneDNN algorithm reads the other "
                                              "operand than ir/ops.td's `grad reads` says"));
    return eltwiseBackwardKernel<kAlg>(i);
  }
};
template <typename Math>
struct UnaryKernels<ir::Op::kSigmoid, Math> : EltwiseKernels<kLogistic> {};
template <typename Math>
struct UnaryKernels<ir::Op::kGelu, Math> : EltwiseKernels<kGeluErf> {};
template <typename Math>
struct UnaryKernels<ir::Op::kGeluTanh, Math> : EltwiseKernels<kGeluTanh> {};
template <typename Math>
struct UnaryKernels<ir::Op::kTanh, Math> : EltwiseKernels<kTanh> {};
// relu: the hand loops above (PyTorch's NaN and -0 rules).
template <typename Math>
struct UnaryKernels<ir::Op::kRelu, Math> {
  static KernelOr forward(const KernelInit& init) {
    return withFloatType(init.node.result()->type().dtype, [](auto tag) -> KernelOr {
      return std::make_unique<ReluKernel<decltype(tag)>>();
    });
  }
  static KernelOr backward(const KernelInit& init) {
    return withFloatType(init.node.result()->type().dtype, [](auto tag) -> KernelOr {
      return std::make_unique<ReluBackwardKernel<decltype(tag)>>();
    });
  }
};

}  // namespace

// The factory pair of every op of class unary_elementwise, from the spec's list.
#define TANDEM_CPU_UNARY_FACTORIES(Name)                           \
  KernelOr make##Name##Kernel(const KernelInit& i) {               \
    return UnaryKernels<ir::Op::k##Name, Name##Math>::forward(i);  \
  }                                                                \
  KernelOr make##Name##BackwardKernel(const KernelInit& i) {       \
    return UnaryKernels<ir::Op::k##Name, Name##Math>::backward(i); \
  }
TANDEM_UNARY_ELEMENTWISE_OPS(TANDEM_CPU_UNARY_FACTORIES)
#undef TANDEM_CPU_UNARY_FACTORIES

KernelOr makeClipKernel(const KernelInit& init) { return clipKernel(init, /*backward=*/false); }
KernelOr makeClipBackwardKernel(const KernelInit& init) {
  return clipKernel(init, /*backward=*/true);
}

KernelOr makeAddKernel(const KernelInit& init) {
  switch (ir::DType t = init.node.result()->type().dtype) {
    case ir::DType::kF32:
      return std::make_unique<AddKernel<float>>();
    case ir::DType::kBF16:
      return std::make_unique<AddKernel<bf16>>();
    case ir::DType::kI32:
      return std::make_unique<AddKernel<int32_t>>();
    default:
      return absl::UnimplementedError(absl::StrCat(
          init.node.describe(), ": the CPU kernel adds f32, bf16 and i32, not ", ir::dtypeName(t)));
  }
}

KernelOr makeCastKernel(const KernelInit& init) {
  // The shape rule admits f32 -> bf16, bf16 -> f32 and i64 -> i32 only.
  if (init.node.result()->type().dtype == ir::DType::kI32)
    return std::make_unique<NarrowIdsKernel>();
  if (init.node.result()->type().dtype == ir::DType::kBF16)
    return std::make_unique<CastKernel<float, bf16>>();
  return std::make_unique<CastKernel<bf16, float>>();
}

}  // namespace tandem::backend::cpu
