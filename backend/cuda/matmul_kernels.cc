// matmul as one cuBLASLt product (backend/cuda/matmul_lt.h: strided batches, a shared
// operand as batch stride 0, the row-major flags mapped onto column-major ones, the
// algorithm chosen once when the kernel is made, plain cuBLAS where no cuBLASLt candidate
// runs). cuBLASLt wants A and B of one type: under mixed precision an f32 master weight
// beside bf16 activations is converted to bf16 into the workspace first, as the linear
// kernels do.

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/elementwise_launch.h"
#include "backend/cuda/matmul_lt.h"
#include "backend/matmul_node.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {
namespace {

constexpr int64_t kAlign = 256;  // what cuBLASLt's heuristic assumes of every pointer
int64_t alignUp(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

class MatmulKernel final : public CudaKernel {
 public:
  static KernelOr create(const KernelInit& init) {
    const ir::MatmulView v(init.node);
    std::unique_ptr<MatmulKernel> k(new MatmulKernel(init.ctx));
    k->setDescription(init.node.describe());
    MatmulLtSpec spec;
    spec.shape = matmulShapeOf(init.node);
    spec.ab = v.c()->type().dtype;  // bf16 when either operand is (the shape rule)
    spec.c = v.c()->type().dtype;
    spec.allow_tf32 = init.ctx.allowTf32();
    const BlasHandles handles{init.ctx.cublasLt(), init.ctx.cublas()};
    ASSIGN_OR_RETURN(k->lt_, MatmulLt::make(handles, spec, k->what()));
    // Workspace: [A in bf16][B in bf16][the product's], each 256-byte aligned.
    int64_t at = 0;
    for (int i = 0; i < 2; ++i) {
      const ir::TensorType& t = init.node.operand(static_cast<size_t>(i))->type();
      k->convert_[i] = t.dtype != spec.ab;
      k->offset_[i] = at;
      k->count_[i] = t.numElements();
      if (k->convert_[i]) at += alignUp(t.numElements() * 2);
    }
    k->lt_offset_ = at;
    k->workspace_bytes_ = at + k->lt_->workspaceBytes();
    RETURN_IF_ERROR(init.ctx.reserveWorkspace(k->workspace_bytes_, k->what()));
    return std::unique_ptr<CudaKernel>(std::move(k));
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    ASSIGN_OR_RETURN(void* ws, ctx().workspace(workspace_bytes_, what()));
    char* scratch = static_cast<char*>(ws);
    const void* operand[2] = {in[0].data, in[1].data};
    for (int i = 0; i < 2; ++i) {
      if (!convert_[i]) continue;
      auto* low = reinterpret_cast<uint16_t*>(scratch + offset_[i]);
      launchCast(static_cast<const float*>(operand[i]), low, count_[i], stream);
      operand[i] = low;
    }
    void* lt_ws = lt_->workspaceBytes() > 0 ? scratch + lt_offset_ : nullptr;
    const BlasHandles handles{ctx().cublasLt(), ctx().cublas()};
    return lt_->run(handles, operand[0], operand[1], nullptr, out[0].data, lt_ws, stream);
  }

 private:
  explicit MatmulKernel(CudaContext& ctx) : CudaKernel(ctx) {}

  std::unique_ptr<MatmulLt> lt_;
  bool convert_[2] = {false, false};
  int64_t offset_[2] = {0, 0}, count_[2] = {0, 0};
  int64_t lt_offset_ = 0, workspace_bytes_ = 0;
};

}  // namespace

KernelOr makeMatmulKernel(const KernelInit& init) { return MatmulKernel::create(init); }

}  // namespace tandem::backend::cuda
