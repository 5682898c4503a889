// compare, where, mod and mod_backward on CUDA: one own kernel (select.cu) over
// select_at.h, the per-element math the host tests check against the CPU kernels. f32
// and bf16 operands, each through its broadcast map.

#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/broadcast_index.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/select_launch.h"
#include "backend/select_node.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {
namespace {

class SelectKernel final : public CudaKernel {
 public:
  SelectKernel(CudaContext& ctx, SelectOperands ops, bool y_bf16)
      : CudaKernel(ctx), ops_(ops), y_bf16_(y_bf16) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    SelectOperands ops = ops_;
    for (int32_t k = 0; k < ops.count; ++k) ops.data[k] = in[size_t(k)].data;
    launchSelect(ops, out[0].data, y_bf16_, out[0].numElements(), stream);
    return absl::OkStatus();
  }

 private:
  SelectOperands ops_;
  bool y_bf16_;
};

KernelOr makeSelect(const KernelInit& init, SelectKind kind) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.result()->type();
  SelectOperands ops;
  ops.kind = kind;
  ops.count = static_cast<int32_t>(n.numOperands());
  if (kind == SelectKind::kBinary) ops.fn = binaryFnOf(n);
  if (kind == SelectKind::kModBackward) ops.fmod = ir::attr::fmod(n);
  for (int32_t k = 0; k < ops.count; ++k) {
    const ir::TensorType& x = n.operand(size_t(k))->type();
    if (x.dtype != ir::DType::kF32 && x.dtype != ir::DType::kBF16)
      return absl::UnimplementedError(absl::StrCat(
          n.describe(), ": ", n.opName(), " takes f32 or bf16, not ", ir::dtypeName(x.dtype)));
    ops.bf16[k] = x.dtype == ir::DType::kBF16;
    ASSIGN_OR_RETURN(ops.map[k], broadcastMap(x.shape, y.shape, n.describe()));
  }
  return std::make_unique<SelectKernel>(init.ctx, ops, y.dtype == ir::DType::kBF16);
}

}  // namespace

KernelOr makeCompareKernel(const KernelInit& init) { return makeSelect(init, SelectKind::kBinary); }
KernelOr makeModKernel(const KernelInit& init) { return makeSelect(init, SelectKind::kBinary); }
KernelOr makeWhereKernel(const KernelInit& init) { return makeSelect(init, SelectKind::kWhere); }
KernelOr makeModBackwardKernel(const KernelInit& init) {
  return makeSelect(init, SelectKind::kModBackward);
}

}  // namespace tandem::backend::cuda
