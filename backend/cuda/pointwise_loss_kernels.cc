// The pointwise losses (mse_loss, l1_loss, smooth_l1_loss, bce_with_logits) and their
// backward ops on CUDA: own kernels (pointwise_loss.cu) over backend/pointwise_loss_math.h,
// the CPU kernels' math, the loss summed in double in a fixed order. The spec's class
// list instantiates the factories; a missing NameMath does not compile.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/pointwise_loss_launch.h"
#include "backend/pointwise_loss_math.h"
#include "backend/pointwise_loss_node.h"
#include "ir/kernel_ops.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {
namespace {

template <typename Math>
class CudaPointwiseLossKernel final : public CudaKernel {
 public:
  CudaPointwiseLossKernel(CudaContext& ctx, const PointwiseLossSpec& spec, bool backward)
      : CudaKernel(ctx), spec_(spec), backward_(backward) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    PointwiseLossLaunch a{.x = in[0].f32(),
                          .target = in[1].f32(),
                          .n = in[0].numElements(),
                          .param = spec_.param,
                          .divisor = spec_.divisor};
    if (spec_.pos_weight >= 0) {
      const TensorView& p = in[static_cast<size_t>(spec_.pos_weight)];
      a.pos_weight = p.f32();
      a.pos_weight_n = p.numElements();
    }
    if (backward_)
      launchPointwiseLossBackward<Math>(a, in[2].f32(), out[0].f32(), stream);
    else
      launchPointwiseLoss<Math>(a, out[0].f32(), stream);
    return absl::OkStatus();
  }

 private:
  PointwiseLossSpec spec_;
  bool backward_;
};

}  // namespace

// x, target[, pos_weight] forward; x, target, dloss[, pos_weight] backward.
#define TANDEM_CUDA_POINTWISE_LOSS_FACTORIES(Name)                              \
  KernelOr make##Name##Kernel(const KernelInit& init) {                         \
    RETURN_IF_ERROR(checkF32Operands(init.node, "the CUDA kernel"));            \
    return std::unique_ptr<CudaKernel>(new CudaPointwiseLossKernel<Name##Math>( \
        init.ctx, pointwiseLossSpecOf<Name##Math>(init.node, 2), false));       \
  }                                                                             \
  KernelOr make##Name##BackwardKernel(const KernelInit& init) {                 \
    RETURN_IF_ERROR(checkF32Operands(init.node, "the CUDA kernel"));            \
    return std::unique_ptr<CudaKernel>(new CudaPointwiseLossKernel<Name##Math>( \
        init.ctx, pointwiseLossSpecOf<Name##Math>(init.node, 3), true));        \
  }
TANDEM_POINTWISE_LOSS_OPS(TANDEM_CUDA_POINTWISE_LOSS_FACTORIES)
#undef TANDEM_CUDA_POINTWISE_LOSS_FACTORIES

}  // namespace tandem::backend::cuda
