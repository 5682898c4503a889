// sgd_update on CUDA: the in-place SGD step as one own kernel per node (optimizer.cu). It
// has no results; it writes its operand views w (in[0]) and m (in[2], present iff
// momentum > 0), which point at the variables' storage. The gradient is f32, or bf16 when
// it was all-reduced in bf16 (allreduce-dtype=bf16); it is widened exactly, so the step
// itself is the f32 one, the CPU's to the bit.
//
// sgd_update_group (group-sgd-updates, on by default for CUDA devices) steps k parameters
// of a device in one launch per 48 (optimizer_plan.h) instead of one launch each.
//
// adamw_update: AdamW's step (adamw.cu) with its count in device memory.
//
// Each reads the learning-rate schedule's factor, when the node has one, from device
// memory where the kernel runs (a recorded step replays with the same pointers).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/adamw_launch.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/optimizer_launch.h"
#include "backend/sgd_checks.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

/// The schedule's factor a launch reads (operand `at`, device memory), or null.
const float* lrFactor(absl::Span<const TensorView> in, size_t at) {
  return at == SIZE_MAX ? nullptr : in[at].f32();
}

class SgdUpdateKernel final : public CudaKernel {
 public:
  SgdUpdateKernel(CudaContext& ctx, bool bf16_grad, const SgdHyper& p, size_t lr_scale)
      : CudaKernel(ctx), bf16_grad_(bf16_grad), params_(p), lr_scale_(lr_scale) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView>) override {
    float* w = in[0].f32();
    float* m = params_.momentum > 0 ? in[2].f32() : nullptr;
    const int64_t n = in[0].numElements();
    SgdHyper p = params_;
    p.lr_factor = lrFactor(in, lr_scale_);
    if (bf16_grad_)
      launchSgdUpdate(w, static_cast<const uint16_t*>(in[1].data), m, n, p, stream);
    else
      launchSgdUpdate(w, in[1].f32(), m, n, p, stream);
    return absl::OkStatus();
  }

 private:
  bool bf16_grad_;
  SgdHyper params_;
  size_t lr_scale_;
};

class SgdUpdateGroupKernel final : public CudaKernel {
 public:
  SgdUpdateGroupKernel(CudaContext& ctx, ir::SgdGroupLayout layout, bool bf16_grad,
                       const SgdHyper& p, size_t lr_scale, std::vector<SgdGroupLaunch> plan)
      : CudaKernel(ctx),
        layout_(layout),
        bf16_grad_(bf16_grad),
        params_(p),
        lr_scale_(lr_scale),
        plan_(std::move(plan)) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView>) override {
    // The sizes were planned from the node's types; the pointers are this run's views.
    SgdHyper p = params_;
    p.lr_factor = lrFactor(in, lr_scale_);
    for (const SgdGroupLaunch& launch : plan_) {
      SgdGroupTable table{};
      table.count = launch.count;
      std::copy(launch.first_block, launch.first_block + launch.count + 1, table.first_block);
      for (int t = 0; t < launch.count; ++t) {
        const size_t j = static_cast<size_t>(launch.first + t);
        table.w[t] = in[layout_.weight(j)].f32();
        table.g[t] = in[layout_.gradient(j)].data;
        table.m[t] = layout_.momentum ? in[layout_.buffer(j)].f32() : nullptr;
        table.n[t] = in[layout_.weight(j)].numElements();
      }
      launchSgdUpdateGroup(table, launch.blocks(), layout_.momentum, bf16_grad_, p, stream);
    }
    return absl::OkStatus();
  }

 private:
  ir::SgdGroupLayout layout_;
  bool bf16_grad_;
  SgdHyper params_;
  size_t lr_scale_;
  std::vector<SgdGroupLaunch> plan_;
};

// adamw_update: AdamW's own kernel (adamw.cu) and the step count's increment, both on the
// stream; the scalars are made on the GPU from the count (no host round trip per step).
class AdamwUpdateKernel final : public CudaKernel {
 public:
  AdamwUpdateKernel(CudaContext& ctx, bool bf16_grad, const AdamWHyper& h, size_t lr_scale)
      : CudaKernel(ctx), bf16_grad_(bf16_grad), hyper_(h), lr_scale_(lr_scale) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView>) override {
    using V = ir::AdamwUpdateView;
    float* w = in[V::kW].f32();
    float* m = in[V::kM].f32();
    float* v = in[V::kV].f32();
    float* step = in[V::kStep].f32();
    const int64_t n = in[V::kW].numElements();
    const float* factor = lrFactor(in, lr_scale_);
    if (bf16_grad_)
      launchAdamWUpdate(w, static_cast<const uint16_t*>(in[V::kG].data), m, v, n, step, hyper_,
                        factor, stream);
    else
      launchAdamWUpdate(w, in[V::kG].f32(), m, v, n, step, hyper_, factor, stream);
    return absl::OkStatus();
  }

 private:
  bool bf16_grad_;
  AdamWHyper hyper_;
  size_t lr_scale_;
};

SgdHyper hyperparameters(const ir::Node& node) {
  return SgdHyper{ir::attr::lr(node), static_cast<float>(ir::attr::momentum(node)),
                  static_cast<float>(ir::attr::weight_decay(node)), nullptr};
}

}  // namespace

KernelOr makeSgdUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdate(node, "CUDA"));
  return std::unique_ptr<CudaKernel>(new SgdUpdateKernel(
      init.ctx, node.operand(1)->type().dtype == ir::DType::kBF16, hyperparameters(node),
      lrScaleOperand(node)));
}

KernelOr makeAdamwUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkAdamwUpdate(node, "CUDA"));
  return std::unique_ptr<CudaKernel>(new AdamwUpdateKernel(
      init.ctx, node.operand(ir::AdamwUpdateView::kG)->type().dtype == ir::DType::kBF16,
      adamwHyper(node), lrScaleOperand(node)));
}

KernelOr makeSgdUpdateGroupKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdateGroup(node, "CUDA"));
  const ir::SgdGroupLayout layout = ir::sgdGroupLayout(node);
  std::vector<int64_t> sizes;
  for (size_t j = 0; j < layout.k; ++j)
    sizes.push_back(node.operand(layout.weight(j))->type().numElements());
  return std::unique_ptr<CudaKernel>(new SgdUpdateGroupKernel(
      init.ctx, layout, node.operand(layout.gradient(0))->type().dtype == ir::DType::kBF16,
      hyperparameters(node), lrScaleOperand(node), planSgdGroupLaunches(sizes)));
}

}  // namespace tandem::backend::cuda
