// sgd_update on CUDA: the in-place SGD step as one own kernel per node (optimizer.cu). It
// has no results; it writes its operand views w (in[0]) and m (in[2], present iff
// momentum > 0), which point at the variables' storage. The gradient is f32, or bf16 when
// it was all-reduced in bf16 (allreduce-dtype=bf16); it is widened exactly, so the step
// itself is the f32 one, the CPU's to the bit.
//
// One launch per parameter: the IR has one sgd_update node per parameter. A multi-tensor
// launch over all parameters of a device would need the IR (or the executor) to group
// them into one node.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/optimizer_launch.h"
#include "backend/sgd_checks.h"

namespace tandem::backend::cuda {
namespace {

class SgdUpdateKernel final : public CudaKernel {
 public:
  SgdUpdateKernel(CudaContext& ctx, bool bf16_grad, const SgdParams& p)
      : CudaKernel(ctx), bf16_grad_(bf16_grad), params_(p) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView>) override {
    float* w = in[0].f32();
    float* m = in.size() > 2 ? in[2].f32() : nullptr;
    const int64_t n = in[0].numElements();
    if (bf16_grad_)
      launchSgdUpdate(w, static_cast<const uint16_t*>(in[1].data), m, n, params_, stream);
    else
      launchSgdUpdate(w, in[1].f32(), m, n, params_, stream);
    return absl::OkStatus();
  }

 private:
  bool bf16_grad_;
  SgdParams params_;
};

}  // namespace

KernelOr makeSgdUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdate(node, "CUDA"));
  const SgdParams p{static_cast<float>(node.floatAttr("lr")),
                    static_cast<float>(node.floatAttr("momentum")),
                    static_cast<float>(node.floatAttr("weight_decay"))};
  return std::unique_ptr<CudaKernel>(
      new SgdUpdateKernel(init.ctx, node.operand(1)->type().dtype == ir::DType::kBF16, p));
}

}  // namespace tandem::backend::cuda
