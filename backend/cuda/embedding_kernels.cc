// embedding and its backward op on CUDA: own kernels (embedding.cu; rules in
// backend/embedding_math.h, host-tested against the CPU core). The forward is a gather;
// the backward adds dy's rows token by token in index order, one thread per column of the
// table, so each element of dtable gets the CPU's additions in the CPU's order (no
// atomics: the same bits every run). An id outside the table cannot stop a kernel: the
// forward writes a NaN row for it and the backward skips it, never reading past the
// table; the runtime refuses such ids in a graph input before any kernel runs
// (runtime/label_check.h), naming the input, the element and this node.

#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/embedding_launch.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

struct EmbeddingSize {
  int64_t vocab, width, tokens;
};

class EmbeddingKernel final : public CudaKernel {
 public:
  EmbeddingKernel(CudaContext& ctx, const EmbeddingSize& s) : CudaKernel(ctx), s_(s) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    launchEmbedding(in[1].f32(), in[0].i32(), out[0].f32(), s_.vocab, s_.width, s_.tokens, stream);
    return absl::OkStatus();
  }

 private:
  EmbeddingSize s_;
};

class EmbeddingBackwardKernel final : public CudaKernel {
 public:
  EmbeddingBackwardKernel(CudaContext& ctx, const EmbeddingSize& s, bool bf16)
      : CudaKernel(ctx), s_(s), bf16_(bf16) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    if (bf16_)
      launchEmbeddingBackward(static_cast<const uint16_t*>(in[0].data), in[1].i32(), out[0].f32(),
                              s_.vocab, s_.width, s_.tokens, stream);
    else
      launchEmbeddingBackward(in[0].f32(), in[1].i32(), out[0].f32(), s_.vocab, s_.width, s_.tokens,
                              stream);
    return absl::OkStatus();
  }

 private:
  EmbeddingSize s_;
  bool bf16_;
};

}  // namespace

KernelOr makeEmbeddingKernel(const KernelInit& init) {
  const ir::EmbeddingView v(init.node);
  const ir::TensorType& table = v.table()->type();
  return std::unique_ptr<CudaKernel>(new EmbeddingKernel(
      init.ctx, {table.shape[0], table.shape[1], v.ids()->type().numElements()}));
}

KernelOr makeEmbeddingBackwardKernel(const KernelInit& init) {
  const ir::EmbeddingBackwardView v(init.node);
  const ir::TensorType& dtable = v.dtable()->type();
  return std::unique_ptr<CudaKernel>(new EmbeddingBackwardKernel(
      init.ctx, {dtable.shape[0], dtable.shape[1], v.ids()->type().numElements()},
      v.dy()->type().dtype == ir::DType::kBF16));
}

}  // namespace tandem::backend::cuda
