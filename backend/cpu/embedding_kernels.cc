// embedding and its backward op on CPU: the embedding core's loops (embedding_core.h;
// oneDNN has no gather). Every id is checked as it is read: one outside the table is an
// error of the launch naming the node, the token and the id, before anything is written.
// The runtime checks a graph input's ids as the batch is handed over already
// (runtime/label_check.h); this catches ids that come from anywhere else.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cpu/embedding_core.h"
#include "backend/cpu/kernels.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

class EmbeddingKernel final : public CpuKernel {
 public:
  explicit EmbeddingKernel(const EmbeddingShape& s) : s_(s) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    embeddingForward(s_, in[1].f32(), in[0].i32(), out[0].f32());
  }

 private:
  EmbeddingShape s_;
};

class EmbeddingBackwardKernel final : public CpuKernel {
 public:
  EmbeddingBackwardKernel(const EmbeddingShape& s, bool bf16) : s_(s), bf16_(bf16) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    if (bf16_)
      embeddingBackward(s_, in[0].as<bf16>(), in[1].i32(), out[0].f32());
    else
      embeddingBackward(s_, in[0].f32(), in[1].i32(), out[0].f32());
  }

 private:
  EmbeddingShape s_;
  bool bf16_;
};

}  // namespace

KernelOr makeEmbeddingKernel(const KernelInit& init) {
  const ir::EmbeddingView v(init.node);
  const ir::TensorType& table = v.table()->type();
  return std::make_unique<EmbeddingKernel>(
      EmbeddingShape{table.shape[0], table.shape[1], v.ids()->type().numElements()});
}

KernelOr makeEmbeddingBackwardKernel(const KernelInit& init) {
  const ir::EmbeddingBackwardView v(init.node);
  const ir::TensorType& dtable = v.dtable()->type();
  return std::make_unique<EmbeddingBackwardKernel>(
      EmbeddingShape{dtable.shape[0], dtable.shape[1], v.ids()->type().numElements()},
      v.dy()->type().dtype == ir::DType::kBF16);
}

}  // namespace tandem::backend::cpu
