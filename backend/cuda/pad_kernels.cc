// pad and pad_backward: own kernels (pad.cu) over backend/pad_math.h, the CPU kernels'
// index math; f32 or bf16 (mixed precision), plain layout (layout_plan.h gives an op it
// does not list its tensors plain).

#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/pad_launch.h"
#include "backend/pad_node.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

class PadKernel final : public CudaKernel {
 public:
  PadKernel(CudaContext& ctx, bool backward, bool bf16, const PadGeometry& g, float value)
      : CudaKernel(ctx), backward_(backward), bf16_(bf16), g_(g), value_(value) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    if (bf16_)
      run<uint16_t>(stream, in, out);
    else
      run<float>(stream, in, out);
    return absl::OkStatus();
  }

 private:
  template <typename T>
  void run(cudaStream_t stream, absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
    if (backward_)  // dy, x -> dx
      launchPadBackward(in[0].as<const T>(), out[0].as<T>(), g_, stream);
    else
      launchPad(in[0].as<const T>(), out[0].as<T>(), g_, value_, stream);
  }

  bool backward_, bf16_;
  PadGeometry g_;
  float value_;
};

KernelOr makePad(const KernelInit& init, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  if (x.dtype != ir::DType::kF32 && x.dtype != ir::DType::kBF16)
    return absl::UnimplementedError(
        absl::StrCat(n.describe(), ": pad takes f32 or bf16, not ", ir::dtypeName(x.dtype)));
  const PadGeometry g = padGeometryOf(n);
  return std::make_unique<PadKernel>(init.ctx, backward, x.dtype == ir::DType::kBF16, g,
                                     static_cast<float>(ir::attr::value(n)));
}

}  // namespace

KernelOr makePadKernel(const KernelInit& init) { return makePad(init, /*backward=*/false); }
KernelOr makePadBackwardKernel(const KernelInit& init) { return makePad(init, /*backward=*/true); }

}  // namespace tandem::backend::cuda
