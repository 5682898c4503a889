// attention and its backward op on CUDA: own kernels (attention.cu) over the row math of
// backend/attention_math.h, which the host tests check against PyTorch 2's
// F.scaled_dot_product_attention and the CPU kernel. cuDNN 9 has a fused attention, but
// only through its graph API's engine search (the cudnn_frontend library, which the
// toolkit here lacks); docs/GPU.md keeps it as the next step. The dropout step is read
// from @step's replica in the kernel, as dropout's kernel reads it, so a recorded step
// replays with the step of the day.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/attention_node.h"
#include "backend/cuda/attention_launch.h"
#include "backend/cuda/cuda_kernel.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {
namespace {

AttentionLaunch launchOf(const AttentionNode& n) {
  AttentionLaunch a;
  static_cast<AttentionSizes&>(a) = n;
  a.mask = n.mask;
  a.first_sample = n.first_sample;
  return a;
}

/// The launch with this run's @step (operand `step`, device memory) when there is dropout.
AttentionLaunch withStep(AttentionLaunch a, bool dropout, absl::Span<const TensorView> in,
                         size_t step) {
  a.step = dropout ? in[step].i32() : nullptr;
  return a;
}

class AttentionKernel final : public CudaKernel {
 public:
  AttentionKernel(CudaContext& ctx, const AttentionLaunch& a, bool dropout)
      : CudaKernel(ctx), a_(a), dropout_(dropout) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    using V = ir::AttentionView;
    if (in.size() != (dropout_ ? 4u : 3u) || out.size() != 2)
      return absl::InternalError(absl::StrCat(what(), ": launched with ", in.size(),
                                              " operands and ", out.size(), " results"));
    launchAttention(withStep(a_, dropout_, in, V::kStep), in[V::kQ].f32(), in[V::kK].f32(),
                    in[V::kV].f32(), out[0].f32(), out[1].f32(), stream);
    return absl::OkStatus();
  }

 private:
  AttentionLaunch a_;
  bool dropout_;
};

class AttentionBackwardKernel final : public CudaKernel {
 public:
  AttentionBackwardKernel(CudaContext& ctx, const AttentionLaunch& a, bool dropout)
      : CudaKernel(ctx), a_(a), dropout_(dropout) {}

  /// D_i = dO_i . O_i for every query, which the key rows' threads all read.
  absl::Status reserve(const ir::Node& n) {
    return needWorkspace(n, a_.batch * a_.heads * a_.queries * int64_t{4});
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    using V = ir::AttentionBackwardView;
    if (in.size() != (dropout_ ? 7u : 6u) || out.size() != 3)
      return absl::InternalError(absl::StrCat(what(), ": launched with ", in.size(),
                                              " operands and ", out.size(), " results"));
    ASSIGN_OR_RETURN(void* delta, workspace());
    launchAttentionBackward(withStep(a_, dropout_, in, V::kStep), in[V::kDy].f32(), in[V::kQ].f32(),
                            in[V::kK].f32(), in[V::kV].f32(), in[V::kY].f32(), in[V::kLse].f32(),
                            static_cast<float*>(delta), out[0].f32(), out[1].f32(), out[2].f32(),
                            stream);
    return absl::OkStatus();
  }

 private:
  AttentionLaunch a_;
  bool dropout_;
};

class KvWriteKernel final : public CudaKernel {
 public:
  KvWriteKernel(CudaContext& ctx, int64_t batch, int64_t rows, int64_t width)
      : CudaKernel(ctx), batch_(batch), rows_(rows), width_(width) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    using V = ir::KvWriteView;
    return check(launchKvWrite(in[V::kCache].f32(), in[V::kX].f32(), in[V::kPosition].i32(), batch_,
                               rows_, width_, out[0].f32(), stream),
                 "cudaMemcpyAsync", what());
  }

 private:
  int64_t batch_, rows_, width_;
};

class AttentionCachedKernel final : public CudaKernel {
 public:
  AttentionCachedKernel(CudaContext& ctx, const AttentionLaunch& a) : CudaKernel(ctx), a_(a) {}

  /// Each row's log-sum-exp, which nothing reads after a cached step.
  absl::Status reserve(const ir::Node& n) {
    return needWorkspace(n, a_.batch * a_.heads * a_.queries * int64_t{4});
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    using V = ir::AttentionCachedView;
    ASSIGN_OR_RETURN(void* lse, workspace());
    AttentionLaunch a = a_;
    a.position = in[V::kPosition].i32();
    launchAttention(a, in[V::kQ].f32(), in[V::kK].f32(), in[V::kV].f32(), out[0].f32(),
                    static_cast<float*>(lse), stream);
    return absl::OkStatus();
  }

 private:
  AttentionLaunch a_;
};

}  // namespace

KernelOr makeKvWriteKernel(const KernelInit& init) {
  const ir::Shape& cache = ir::KvWriteView(init.node).cache()->type().shape;
  return std::unique_ptr<CudaKernel>(new KvWriteKernel(init.ctx, cache[0], cache[1], cache[2]));
}

KernelOr makeAttentionCachedKernel(const KernelInit& init) {
  std::unique_ptr<AttentionCachedKernel> kernel(new AttentionCachedKernel(
      init.ctx, launchOf(attentionNodeOf(ir::AttentionCachedView(init.node), 0))));
  RETURN_IF_ERROR(kernel->reserve(init.node));
  return std::unique_ptr<CudaKernel>(std::move(kernel));
}

KernelOr makeAttentionKernel(const KernelInit& init) {
  const AttentionNode n = attentionNodeOf(ir::AttentionView(init.node), init.ctx.seed());
  return std::unique_ptr<CudaKernel>(new AttentionKernel(init.ctx, launchOf(n), n.dropout));
}

KernelOr makeAttentionBackwardKernel(const KernelInit& init) {
  const AttentionNode n = attentionNodeOf(ir::AttentionBackwardView(init.node), init.ctx.seed());
  std::unique_ptr<AttentionBackwardKernel> k(
      new AttentionBackwardKernel(init.ctx, launchOf(n), n.dropout));
  RETURN_IF_ERROR(k->reserve(init.node));
  return std::unique_ptr<CudaKernel>(std::move(k));
}

}  // namespace tandem::backend::cuda
