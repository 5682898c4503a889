#include "backend/cuda/cuda_kernel.h"

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/layout_plan.h"
#include "backend/cuda/target_info.h"
#include "ir/plan.h"

namespace tandem::backend::cuda {

absl::Status CudaKernel::launch(Stream& stream, absl::Span<const TensorView> in,
                                absl::Span<const TensorView> out) {
  CudaStream* s = asCudaStream(stream);
  if (s == nullptr)
    return absl::InternalError(
        absl::StrCat(what_, ": launched on ", stream.name(), ", which is not a CUDA stream"));
  CUDA_TRY(what_, cudaSetDevice(ctx_.gpu()));
  RETURN_IF_ERROR(enqueue(s->handle(), in, out));
  // An own kernel's bad launch (grid, resources) is reported at once, not at the next
  // synchronize; library calls have returned their own codes already.
  CUDA_TRY(what_, cudaGetLastError());
  return absl::OkStatus();
}

int64_t CudaKernel::plannedWorkspace(const ir::Node& n) {
  const ir::GraphPlan* plan = n.graph() != nullptr ? n.graph()->plan() : nullptr;
  if (plan == nullptr || n.id() >= plan->nodes.size() || !plan->of(n).workspace) return -1;
  return plan->of(n).workspace->bytes;
}

absl::Status CudaKernel::needWorkspace(const ir::Node& n, int64_t bytes) {
  need_ = bytes;
  const int64_t planned = plannedWorkspace(n);
  planned_ = planned >= 0;
  if (!planned_) return ctx_.reserveWorkspace(bytes, what_);
  if (bytes > planned)
    return absl::FailedPreconditionError(absl::StrCat(
        what_, ": needs ", bytes, " bytes of workspace, the plan gives it ", planned,
        " (the CUDA target declares less than this kernel uses: backend/cuda/target_info.cc)"));
  return absl::OkStatus();
}

absl::Status CudaKernel::bindWorkspace(const TensorView& workspace) {
  if (workspace.bytes() < need_)
    return absl::FailedPreconditionError(absl::StrCat(
        what_, ": needs ", need_, " bytes of workspace, the plan gives it ", workspace.bytes()));
  bound_ = workspace.data;
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaKernel::workspace() const {
  if (!planned_) return ctx_.workspace(need_, what_);
  if (bound_ == nullptr && need_ > 0)
    return absl::InternalError(absl::StrCat(
        what_, ": launched before the loader bound its planned workspace (bindWorkspace)"));
  return bound_;
}

KernelOr makeKernel(const ir::Node& node, CudaContext& ctx,
                    const absl::flat_hash_set<const ir::Value*>* nhwc) {
  if (nhwc != nullptr) RETURN_IF_ERROR(checkNhwcSlots(node, *nhwc));
  KernelInit init{node, ctx, nhwc};
  KernelOr kernel = kernelTable().make(node, init);
  if (kernel.ok()) (*kernel)->setDescription(node.describe());
  return kernel;
}

namespace {
// The ops the CUDA backend has no kernel for (target_info.h): loading one is an error
// naming it.
constexpr bool lacks(ir::Op op) { return lacksKernel(op); }
}  // namespace

const KernelTable<KernelInit, std::unique_ptr<CudaKernel>>& kernelTable() {
  static const auto* filled = [] {
    auto* t = new KernelTable<KernelInit, std::unique_ptr<CudaKernel>>("CUDA");
    auto& table = *t;
    TANDEM_FILL_KERNEL_TABLE()
    return t;
  }();
  return *filled;
}

cudaStream_t streamHandle(Stream& stream) {
  CudaStream* s = asCudaStream(stream);
  return s != nullptr ? s->handle() : nullptr;
}


}  // namespace tandem::backend::cuda
