// sgd_update on CUDA: the in-place SGD step as one own kernel per node (optimizer.cu). It
// has no results; it writes its operand views w (in[0]) and m (in[2], present iff
// momentum > 0), which point at the variables' storage. The gradient is f32, or bf16 when
// it was all-reduced in bf16 (allreduce-dtype=bf16); it is widened exactly, so the step
// itself is the f32 one, the CPU's to the bit.
//
// sgd_update_group (group-updates, on by default for CUDA devices) steps k parameters
// of a device in one launch per 48 (optimizer_plan.h) instead of one launch each.
//
// adamw_update: AdamW's step (adamw.cu) with its count in device memory; adamw_update_group
// its multi-tensor form, as sgd_update_group's.
//
// sgd_update_shard and adamw_update_shard (shard-weight-update) are the same kernels on
// a device's flat shard: the packed weight shard (a value) is copied to the result y,
// which the same launch then steps (the same per-element math, optimizer_math.h).
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
#include "backend/cuda/clip_launch.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/optimizer_launch.h"
#include "backend/sgd_checks.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

/// The weights a step writes: the weight operand's variable (sgd_update, adamw_update),
/// or, for a flat-shard form, its result y after a copy of the packed shard w (none where
/// the plan put y over w).
absl::StatusOr<float*> steppedWeights(const CudaKernel& k, cudaStream_t stream, bool shard,
                                      const TensorView& w, absl::Span<const TensorView> out) {
  if (!shard) return w.f32();
  if (out[0].data != w.data)
    CUDA_TRY(k.what(), cudaMemcpyAsync(out[0].data, w.data, static_cast<size_t>(w.bytes()),
                                       cudaMemcpyDeviceToDevice, stream));
  return out[0].f32();
}

class SgdUpdateKernel final : public CudaKernel {
 public:
  SgdUpdateKernel(CudaContext& ctx, bool bf16_grad, const SgdHyper& p, size_t lr_scale, bool shard)
      : CudaKernel(ctx), bf16_grad_(bf16_grad), params_(p), lr_scale_(lr_scale), shard_(shard) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    ASSIGN_OR_RETURN(float* w, steppedWeights(*this, stream, shard_, in[0], out));
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
  bool shard_;
};

class SgdUpdateGroupKernel final : public CudaKernel {
 public:
  SgdUpdateGroupKernel(CudaContext& ctx, ir::SgdGroupLayout layout, bool bf16_grad,
                       const SgdHyper& p, size_t lr_scale, std::vector<GroupLaunch> plan)
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
    for (const GroupLaunch& launch : plan_) {
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
  std::vector<GroupLaunch> plan_;
};

// adamw_update: AdamW's own kernel (adamw.cu) and the step count's increment, both on the
// stream; the scalars are made on the GPU from the count (no host round trip per step).
class AdamwUpdateKernel final : public CudaKernel {
 public:
  AdamwUpdateKernel(CudaContext& ctx, bool bf16_grad, const AdamWHyper& h, size_t lr_scale,
                    bool shard)
      : CudaKernel(ctx), bf16_grad_(bf16_grad), hyper_(h), lr_scale_(lr_scale), shard_(shard) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    using V = ir::AdamwUpdateView;  // adamw_update_shard's operands are the same
    ASSIGN_OR_RETURN(float* w, steppedWeights(*this, stream, shard_, in[V::kW], out));
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
  bool shard_;
};

// adamw_update_group: one launch per table of up to 48 parameters (optimizer_plan.h), each
// block making its parameter's scalars from that parameter's count, and a second, one-block
// launch that counts each parameter's update.
class AdamwUpdateGroupKernel final : public CudaKernel {
 public:
  AdamwUpdateGroupKernel(CudaContext& ctx, std::vector<AdamwGroupOperands> params, bool bf16_grad,
                         const AdamWHyper& h, size_t lr_scale, std::vector<GroupLaunch> plan)
      : CudaKernel(ctx),
        params_(std::move(params)),
        bf16_grad_(bf16_grad),
        hyper_(h),
        lr_scale_(lr_scale),
        plan_(std::move(plan)) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView>) override {
    // The sizes were planned from the node's types; the pointers are this run's views.
    const float* factor = lrFactor(in, lr_scale_);
    for (const GroupLaunch& launch : plan_) {
      AdamwGroupTable table{};
      table.count = launch.count;
      std::copy(launch.first_block, launch.first_block + launch.count + 1, table.first_block);
      for (int t = 0; t < launch.count; ++t) {
        const AdamwGroupOperands& p = params_[static_cast<size_t>(launch.first + t)];
        table.w[t] = in[p.w].f32();
        table.g[t] = in[p.g].data;
        table.m[t] = in[p.m].f32();
        table.v[t] = in[p.v].f32();
        table.step[t] = in[p.step].f32();
        table.n[t] = in[p.w].numElements();
      }
      launchAdamWUpdateGroup(table, launch.blocks(), bf16_grad_, hyper_, factor, stream);
    }
    return absl::OkStatus();
  }

 private:
  std::vector<AdamwGroupOperands> params_;
  bool bf16_grad_;
  AdamWHyper hyper_;
  size_t lr_scale_;
  std::vector<GroupLaunch> plan_;
};

// clip_grad_norm: per gradient its partial sums of squares (a fixed grid), the factor from
// all partials in order, then the scaled copies; the partials and the factor live in the
// device's workspace, reserved when the kernel is made.
class ClipGradNormKernel final : public CudaKernel {
 public:
  ClipGradNormKernel(CudaContext& ctx, double max_norm, std::vector<int64_t> first_partial)
      : CudaKernel(ctx), max_norm_(max_norm), first_partial_(std::move(first_partial)) {}

  /// The partials (one double per block of every gradient) and the factor after them.
  int64_t workspaceBytes() const {
    return first_partial_.back() * static_cast<int64_t>(sizeof(double)) +
           static_cast<int64_t>(sizeof(float));
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    ASSIGN_OR_RETURN(void* ws, ctx().workspace(workspaceBytes(), what()));
    double* partials = static_cast<double*>(ws);
    float* factor = reinterpret_cast<float*>(partials + first_partial_.back());
    for (size_t k = 0; k < in.size(); ++k)
      launchSumOfSquares(in[k].data, in[k].type.dtype == ir::DType::kBF16, in[k].numElements(),
                         partials + first_partial_[k], stream);
    launchClipFactor(partials, first_partial_.back(), max_norm_, factor, stream);
    for (size_t k = 0; k < in.size(); ++k)
      launchClipScale(in[k].data, out[k].data, in[k].type.dtype == ir::DType::kBF16,
                      in[k].numElements(), factor, stream);
    return absl::OkStatus();
  }

 private:
  double max_norm_;
  std::vector<int64_t> first_partial_;  // per gradient, and the total last
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
      lrScaleOperand(node), ir::SgdUpdateShardView::is(node)));
}

KernelOr makeSgdUpdateShardKernel(const KernelInit& init) { return makeSgdUpdateKernel(init); }

KernelOr makeAdamwUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkAdamwUpdate(node, "CUDA"));
  return std::unique_ptr<CudaKernel>(new AdamwUpdateKernel(
      init.ctx, node.operand(ir::AdamwUpdateView::kG)->type().dtype == ir::DType::kBF16,
      adamwHyper(node), lrScaleOperand(node), ir::AdamwUpdateShardView::is(node)));
}

KernelOr makeAdamwUpdateShardKernel(const KernelInit& init) { return makeAdamwUpdateKernel(init); }

KernelOr makeSgdUpdateGroupKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkUpdateGroup(node, "CUDA"));
  const ir::SgdGroupLayout layout = ir::sgdGroupLayout(node);
  std::vector<int64_t> sizes;
  for (size_t j = 0; j < layout.k; ++j)
    sizes.push_back(node.operand(layout.weight(j))->type().numElements());
  return std::unique_ptr<CudaKernel>(new SgdUpdateGroupKernel(
      init.ctx, layout, node.operand(layout.gradient(0))->type().dtype == ir::DType::kBF16,
      hyperparameters(node), lrScaleOperand(node), planGroupLaunches(sizes)));
}

KernelOr makeAdamwUpdateGroupKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkUpdateGroup(node, "CUDA"));
  std::vector<AdamwGroupOperands> params = adamwGroupOperands(node);
  std::vector<int64_t> sizes;
  for (const AdamwGroupOperands& p : params)
    sizes.push_back(node.operand(p.w)->type().numElements());
  const bool bf16_grad = node.operand(params[0].g)->type().dtype == ir::DType::kBF16;
  return std::unique_ptr<CudaKernel>(new AdamwUpdateGroupKernel(
      init.ctx, std::move(params), bf16_grad, adamwHyper(node), lrScaleOperand(node),
      planGroupLaunches(sizes)));
}

KernelOr makeClipGradNormKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  std::vector<int64_t> first_partial{0};
  for (const ir::Value* g : node.operands()) {
    if (g->type().dtype != ir::DType::kF32 && g->type().dtype != ir::DType::kBF16)
      return absl::UnimplementedError(absl::StrCat(node.describe(),
                                                   ": the CUDA kernel clips f32 or bf16 "
                                                   "gradients, not %",
                                                   g->name(), " of ", ir::dtypeName(g->type().dtype)));
    first_partial.push_back(first_partial.back() + clipBlocks(g->type().numElements()));
  }
  auto k = std::make_unique<ClipGradNormKernel>(init.ctx, ir::ClipGradNormView(node).max_norm(),
                                                std::move(first_partial));
  k->setDescription(node.describe());
  RETURN_IF_ERROR(init.ctx.reserveWorkspace(k->workspaceBytes(), k->what()));
  return std::unique_ptr<CudaKernel>(std::move(k));
}

}  // namespace tandem::backend::cuda
