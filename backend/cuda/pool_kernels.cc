// Max and average pooling and their backward ops: own kernels (pool.cu), not cuDNN's.
// cuDNN's max pooling backward needs the forward output and routes ties its own way;
// the CPU backend sends a window's gradient to its first maximum in row-major order and
// propagates NaN, and pool_math.h does exactly that (the host tests compare it with the
// CPU kernels bit for bit). Pooling is memory-bound: a loop reading each input once per
// window is what cuDNN would do too. f32 or bf16 (mixed precision), as on the CPU.
// (global_avg_pool lives with the elementwise family.)

#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/pool_launch.h"
#include "backend/cuda/pool_params.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

enum class PoolKind { kMax, kAvg };

class PoolKernel final : public CudaKernel {
 public:
  PoolKernel(CudaContext& ctx, PoolKind kind, bool backward, bool bf16, const PoolParams& p)
      : CudaKernel(ctx), kind_(kind), backward_(backward), bf16_(bf16), p_(p) {}

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
    if (!backward_) {  // x -> y
      const T* x = in[0].as<const T>();
      T* y = out[0].as<T>();
      kind_ == PoolKind::kMax ? launchMaxPool(x, y, p_, stream) : launchAvgPool(x, y, p_, stream);
      return;
    }
    const T* dy = in[0].as<const T>();  // dy, x -> dx
    T* dx = out[0].as<T>();
    if (kind_ == PoolKind::kMax)
      launchMaxPoolBackward(dy, in[1].as<const T>(), dx, p_, stream);
    else
      launchAvgPoolBackward(dy, in[1].as<const T>(), dx, p_, stream);
  }

  PoolKind kind_;
  bool backward_, bf16_;
  PoolParams p_;
};

/// (forward: x -> y; backward: dy, x -> dx.)
KernelOr makePool(const KernelInit& init, PoolKind kind, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  const ir::TensorType& y = backward ? n.operand(0)->type() : n.result()->type();
  if (x.dtype != ir::DType::kF32 && x.dtype != ir::DType::kBF16)
    return absl::UnimplementedError(
        absl::StrCat(n.describe(), ": pooling takes f32 or bf16, not ", ir::dtypeName(x.dtype)));
  PoolParams p =
      poolParams(x.shape, y.shape, ir::attr::kernel(n), ir::attr::stride(n), ir::attr::pad(n));
  // NHWC (layout_plan.h gives all of a pooling node's tensors one layout): a plane's
  // pixels are C elements apart.
  if (init.isNhwc(n.operand(0))) p.step = x.shape[1];
  p.relu = kind == PoolKind::kAvg && ir::attr::relu(n);  // fuse-relu-pool's
  return std::make_unique<PoolKernel>(init.ctx, kind, backward, x.dtype == ir::DType::kBF16, p);
}

}  // namespace

KernelOr makeMaxPool2dKernel(const KernelInit& init) {
  return makePool(init, PoolKind::kMax, /*backward=*/false);
}
KernelOr makeAvgPool2dKernel(const KernelInit& init) {
  return makePool(init, PoolKind::kAvg, /*backward=*/false);
}
KernelOr makeMaxPool2dBackwardKernel(const KernelInit& init) {
  return makePool(init, PoolKind::kMax, /*backward=*/true);
}
KernelOr makeAvgPool2dBackwardKernel(const KernelInit& init) {
  return makePool(init, PoolKind::kAvg, /*backward=*/true);
}

}  // namespace tandem::backend::cuda
