// Sources, elementwise ops, casts, reshapes and global average pooling on CUDA.
//
// constant is an own fill kernel. initialize computes the variable's value on the host
// when the kernel is made, with the CPU backend's own initializer code (the values depend
// only on the seed and the variable's name, so both backends start from the same bits),
// into a pinned buffer the kernel owns; a launch copies it over. assign, flatten,
// flatten_backward and reshape are device-to-device copies (nothing when the memory plan
// gave the result the operand's buffer), as on the CPU; transpose a gather (permute.cu). The unary
// ops (backend/unary_math.h: relu, ...) and their backward ops, add, cast and the global pools are
// own kernels (elementwise.cu) on f32 and bf16 (add also i32), computing in float and rounding a
// bf16 result once, as the CPU kernels do.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/elementwise_launch.h"
#include "backend/cuda/permute_launch.h"
#include "backend/initializers.h"
#include "backend/unary_math.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

/// A kernel whose enqueue is the function `F(cudaStream_t, in, out) -> Status`.
template <typename F>
class FnKernel final : public CudaKernel {
 public:
  FnKernel(CudaContext& ctx, F f) : CudaKernel(ctx), f_(std::move(f)) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    return f_(stream, in, out);
  }

 private:
  F f_;
};

template <typename F>
KernelOr fnKernel(const KernelInit& init, F f) {
  return std::unique_ptr<CudaKernel>(new FnKernel<F>(init.ctx, std::move(f)));
}

/// bf16 storage as the launch functions take it.
const uint16_t* bf16In(const TensorView& v) { return static_cast<const uint16_t*>(v.data); }
uint16_t* bf16Out(const TensorView& v) { return static_cast<uint16_t*>(v.data); }

/// `dst` = `src` on the device (assign, flatten, flatten_backward): nothing when they are
/// one buffer.
absl::Status copyOnDevice(const std::string& what, const TensorView& src, const TensorView& dst,
                          cudaStream_t stream) {
  if (src.bytes() != dst.bytes())
    return absl::InternalError(
        absl::StrCat(what, ": copies ", src.bytes(), " bytes into ", dst.bytes()));
  if (src.data == dst.data || src.bytes() == 0) return absl::OkStatus();
  CUDA_TRY(what, cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(src.bytes()),
                                 cudaMemcpyDeviceToDevice, stream));
  return absl::OkStatus();
}

/// The kernel of a copy op: operand 0 into result 0 (or into the one out view of assign).
class CopyKernel final : public CudaKernel {
 public:
  explicit CopyKernel(CudaContext& ctx) : CudaKernel(ctx) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    if (in.size() < 1 || out.size() != 1)
      return absl::InternalError(absl::StrCat(what(), ": launched with ", in.size(),
                                              " operands and ", out.size(),
                                              " results; a copy takes one of each"));
    return copyOnDevice(what(), in[0], out[0], stream);
  }
};

/// initialize: the value computed once on the host (pinned), copied at every launch; a
/// second run of the init graph gives the same parameters again, as on the CPU.
class InitializeKernel final : public CudaKernel {
 public:
  InitializeKernel(CudaContext& ctx, void* host, int64_t bytes)
      : CudaKernel(ctx), host_(host), bytes_(bytes) {}
  ~InitializeKernel() override {
    if (host_ != nullptr) cudaFreeHost(host_);
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView>,
                       absl::Span<const TensorView> out) override {
    if (out.size() != 1 || out[0].bytes() != bytes_)
      return absl::InternalError(absl::StrCat(what(), ": the result view does not hold the ",
                                              bytes_, " bytes of the variable"));
    if (bytes_ == 0) return absl::OkStatus();
    CUDA_TRY(what(), cudaMemcpyAsync(out[0].data, host_, static_cast<size_t>(bytes_),
                                     cudaMemcpyHostToDevice, stream));
    return absl::OkStatus();
  }

 private:
  void* host_;
  int64_t bytes_;
};

absl::StatusOr<const ir::Var*> findVar(const ir::Node& node) {
  const std::string& name = ir::attr::var(node);
  const ir::Var* var = node.graph()->module()->findVar(name);
  if (var == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), " refers to unknown variable @", name));
  return var;
}

absl::Status unsupported(const ir::Node& n, ir::DType t, absl::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat(n.describe(), ": the CUDA kernel supports ", what, ", not ", ir::dtypeName(t)));
}

/// f32 or bf16, as the CPU's withFloatType kernels accept.
absl::Status checkFloat(const ir::Node& n, ir::DType t) {
  if (t == ir::DType::kF32 || t == ir::DType::kBF16) return absl::OkStatus();
  return unsupported(n, t, "f32 and bf16");
}

/// global_avg_pool (x -> y) and its backward (dy, x -> dx): N*C planes of H*W values.
KernelOr makeGlobalPool(const KernelInit& init, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  RETURN_IF_ERROR(checkFloat(n, x.dtype));
  if (x.shape.size() != 4)
    return absl::InvalidArgumentError(
        absl::StrCat(n.describe(), ": x is ", ir::toString(x), ", not [N,C,H,W]"));
  const int64_t planes = x.shape[0] * x.shape[1], hw = x.shape[2] * x.shape[3];
  const bool bf16 = x.dtype == ir::DType::kBF16;
  // x (and the backward's dx, which layout_plan.h gives x's layout) NHWC: pixels C apart.
  const int64_t step = init.isNhwc(n.operand(backward ? 1 : 0)) ? x.shape[1] : 1;
  return fnKernel(
      init, [=](cudaStream_t s, absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
        if (backward) {
          if (bf16)
            launchGlobalAvgPoolBackward(bf16In(in[0]), bf16Out(out[0]), planes, hw, step, s);
          else
            launchGlobalAvgPoolBackward(in[0].f32(), out[0].f32(), planes, hw, step, s);
        } else if (bf16) {
          launchGlobalAvgPool(bf16In(in[0]), bf16Out(out[0]), planes, hw, step, s);
        } else {
          launchGlobalAvgPool(in[0].f32(), out[0].f32(), planes, hw, step, s);
        }
        return absl::OkStatus();
      });
}

}  // namespace

KernelOr makeConstantKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const double value = ir::attr::value(n);
  switch (ir::DType t = n.result()->type().dtype) {
    case ir::DType::kF32: {
      const float v = static_cast<float>(value);
      return fnKernel(init, [v](cudaStream_t s, absl::Span<const TensorView>,
                                absl::Span<const TensorView> out) {
        launchFill(out[0].f32(), out[0].numElements(), v, s);
        return absl::OkStatus();
      });
    }
    case ir::DType::kI32: {
      // Converting a fraction or an out-of-range double would be silently wrong (or UB).
      if (std::trunc(value) != value || value < INT32_MIN || value > INT32_MAX)
        return absl::InvalidArgumentError(
            absl::StrCat(n.describe(), ": value ", value, " is not an i32"));
      const int32_t v = static_cast<int32_t>(value);
      return fnKernel(init, [v](cudaStream_t s, absl::Span<const TensorView>,
                                absl::Span<const TensorView> out) {
        launchFill(out[0].i32(), out[0].numElements(), v, s);
        return absl::OkStatus();
      });
    }
    default:
      return unsupported(n, t, "f32 and i32");
  }
}

KernelOr makeInitializeKernel(const KernelInit& init) {
  ASSIGN_OR_RETURN(const ir::Var* var, findVar(init.node));
  if (absl::Status s = checkInitializer(*var); !s.ok())
    return absl::Status(s.code(), absl::StrCat(init.node.describe(), ": ", s.message()));
  ir::Var replica = *var;  // a sharded variable's initializer fills this device's shard
  replica.type = init.node.result()->type();
  const int64_t bytes = replica.type.bytes();
  void* host = nullptr;
  if (bytes > 0) {
    // The factory runs with the kernel's GPU current: the buffer is pinned for it.
    CUDA_TRY(init.node.describe(), cudaMallocHost(&host, static_cast<size_t>(bytes)));
    fillInitializer(replica, init.ctx.seed(), host);
  }
  return std::unique_ptr<CudaKernel>(new InitializeKernel(init.ctx, host, bytes));
}

// assign has no results in the IR: the runtime passes the device's replica of the
// variable as the one `out` view, and in[0] is the value.
KernelOr makeAssignKernel(const KernelInit& init) {
  RETURN_IF_ERROR(findVar(init.node).status());
  return std::unique_ptr<CudaKernel>(new CopyKernel(init.ctx));
}

// The unary ops of backend/unary_math.h: one forward and one backward factory each, from its list.
namespace {

template <typename Op>
KernelOr unaryKernel(const KernelInit& init) {
  const ir::DType t = init.node.result()->type().dtype;
  RETURN_IF_ERROR(checkFloat(init.node, t));
  return fnKernel(
      init, [t](cudaStream_t s, absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
        const int64_t n = out[0].numElements();
        if (t == ir::DType::kBF16)
          launchUnary<Op>(bf16In(in[0]), bf16Out(out[0]), n, s);
        else
          launchUnary<Op>(in[0].f32(), out[0].f32(), n, s);
        return absl::OkStatus();
      });
}

template <typename Op>
KernelOr unaryBackwardKernel(const KernelInit& init) {  // dy, v
  const ir::DType t = init.node.result()->type().dtype;
  RETURN_IF_ERROR(checkFloat(init.node, t));
  return fnKernel(
      init, [t](cudaStream_t s, absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
        const int64_t n = out[0].numElements();
        if (t == ir::DType::kBF16)
          launchUnaryBackward<Op>(bf16In(in[0]), bf16In(in[1]), bf16Out(out[0]), n, s);
        else
          launchUnaryBackward<Op>(in[0].f32(), in[1].f32(), out[0].f32(), n, s);
        return absl::OkStatus();
      });
}

}  // namespace

#define TANDEM_UNARY_FACTORIES(Name)                                                            \
  KernelOr make##Name##Kernel(const KernelInit& init) { return unaryKernel<Name##Math>(init); } \
  KernelOr make##Name##BackwardKernel(const KernelInit& init) {                                 \
    return unaryBackwardKernel<Name##Math>(init);                                               \
  }
TANDEM_UNARY_ELEMENTWISE_OPS(TANDEM_UNARY_FACTORIES)
#undef TANDEM_UNARY_FACTORIES

// clip (x -> y) and clip_backward (dy, x -> dx): the bounds are the node's attributes.
namespace {

KernelOr clipKernel(const KernelInit& init, bool backward) {
  const ir::DType t = init.node.result()->type().dtype;
  RETURN_IF_ERROR(checkFloat(init.node, t));
  const auto lo = static_cast<float>(ir::attr::min(init.node));
  const auto hi = static_cast<float>(ir::attr::max(init.node));
  return fnKernel(init, [t, lo, hi, backward](cudaStream_t s, absl::Span<const TensorView> in,
                                              absl::Span<const TensorView> out) {
    const int64_t n = out[0].numElements();
    const bool bf16 = t == ir::DType::kBF16;
    if (backward && bf16)
      launchClipBackward(bf16In(in[0]), bf16In(in[1]), bf16Out(out[0]), n, lo, hi, s);
    else if (backward)
      launchClipBackward(in[0].f32(), in[1].f32(), out[0].f32(), n, lo, hi, s);
    else if (bf16)
      launchClip(bf16In(in[0]), bf16Out(out[0]), n, lo, hi, s);
    else
      launchClip(in[0].f32(), out[0].f32(), n, lo, hi, s);
    return absl::OkStatus();
  });
}

}  // namespace

KernelOr makeClipKernel(const KernelInit& init) { return clipKernel(init, /*backward=*/false); }
KernelOr makeClipBackwardKernel(const KernelInit& init) {
  return clipKernel(init, /*backward=*/true);
}

KernelOr makeAddKernel(const KernelInit& init) {
  const ir::DType t = init.node.result()->type().dtype;
  if (t != ir::DType::kF32 && t != ir::DType::kBF16 && t != ir::DType::kI32)
    return unsupported(init.node, t, "f32, bf16 and i32");
  return fnKernel(
      init, [t](cudaStream_t s, absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
        const int64_t n = out[0].numElements();
        if (t == ir::DType::kBF16)
          launchAdd(bf16In(in[0]), bf16In(in[1]), bf16Out(out[0]), n, s);
        else if (t == ir::DType::kI32)
          launchAdd(in[0].i32(), in[1].i32(), out[0].i32(), n, s);
        else
          launchAdd(in[0].f32(), in[1].f32(), out[0].f32(), n, s);
        return absl::OkStatus();
      });
}

KernelOr makeCastKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::DType from = n.operand(0)->type().dtype, to = n.result()->type().dtype;
  const bool narrow = from == ir::DType::kF32 && to == ir::DType::kBF16;
  const bool ids = from == ir::DType::kI64 && to == ir::DType::kI32;
  if (!narrow && !ids && !(from == ir::DType::kBF16 && to == ir::DType::kF32))
    return absl::UnimplementedError(absl::StrCat(n.describe(),
                                                 ": the CUDA kernel casts f32 to "
                                                 "bf16 and back, and i64 to i32, not ",
                                                 ir::dtypeName(from), " to ", ir::dtypeName(to)));
  return fnKernel(init, [narrow, ids](cudaStream_t s, absl::Span<const TensorView> in,
                                      absl::Span<const TensorView> out) {
    const int64_t count = out[0].numElements();
    if (ids)
      launchCast(in[0].as<int64_t>(), out[0].i32(), count, s);
    else if (narrow)
      launchCast(in[0].f32(), bf16Out(out[0]), count, s);
    else
      launchCast(bf16In(in[0]), out[0].f32(), count, s);
    return absl::OkStatus();
  });
}

// A row-major reshape keeps every byte where it is: one copy of the operand.
KernelOr makeFlattenKernel(const KernelInit& init) {
  return std::unique_ptr<CudaKernel>(new CopyKernel(init.ctx));
}

// flatten_backward(dy, x): x only gives the shape; the bytes are dy's.
KernelOr makeFlattenBackwardKernel(const KernelInit& init) {
  return std::unique_ptr<CudaKernel>(new CopyKernel(init.ctx));
}

KernelOr makeReshapeKernel(const KernelInit& init) {
  return std::unique_ptr<CudaKernel>(new CopyKernel(init.ctx));
}

// transpose: a gather through the permutation (permute.cu).
KernelOr makeTransposeKernel(const KernelInit& init) {
  const ir::TransposeView v(init.node);
  const ir::TensorType& x = v.x()->type();
  if (x.rank() > kMaxPermuteRank)
    return absl::UnimplementedError(absl::StrCat(init.node.describe(), ": x has ", x.rank(),
                                                 " axes; the CUDA transpose takes at most ",
                                                 kMaxPermuteRank));
  const std::vector<int64_t> shape(x.shape.begin(), x.shape.end());
  const PermutePlan plan = permutePlan(shape.data(), v.perm().data(), static_cast<int>(x.rank()));
  const int bytes = static_cast<int>(ir::dtypeBytes(x.dtype));
  return fnKernel(init, [plan, bytes](cudaStream_t s, absl::Span<const TensorView> in,
                                      absl::Span<const TensorView> out) {
    launchPermute(in[0].data, out[0].data, out[0].numElements(), bytes, plan, s);
    return absl::OkStatus();
  });
}

KernelOr makeGlobalAvgPoolKernel(const KernelInit& init) {
  return makeGlobalPool(init, /*backward=*/false);
}

KernelOr makeGlobalAvgPoolBackwardKernel(const KernelInit& init) {
  return makeGlobalPool(init, /*backward=*/true);
}

}  // namespace tandem::backend::cuda
