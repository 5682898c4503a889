// dropout on CUDA: an own kernel (dropout.cu), one thread per group of eight elements,
// whose per-thread math (dropout_math.h's dropoutThread over backend/dropout_mask.h)
// the host tests run against the CPU kernel. The step is not a launch argument: the kernel
// reads @step's replica on the device when it runs, so a recorded step (a CUDA graph)
// replays with the step the runtime wrote before this update. The backward is the same
// kernel on dy (dropout of dy with the same counters).

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/dropout_launch.h"
#include "backend/dropout_node.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {
namespace {

class DropoutKernel final : public CudaKernel {
 public:
  DropoutKernel(CudaContext& ctx, const DropoutMask& mask, const DropoutRows& rows, bool bf16)
      : CudaKernel(ctx), mask_(mask), rows_(rows), bf16_(bf16) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    if (in.size() != 2 || out.size() != 1)
      return absl::InternalError(absl::StrCat(what(), ": launched with ", in.size(),
                                              " operands and ", out.size(),
                                              " results; dropout takes x and @step, gives y"));
    const int32_t* step = in[1].i32();
    if (bf16_)
      launchDropout(mask_, step, rows_.first, rows_.rows, rows_.per_row,
                    static_cast<const uint16_t*>(in[0].data), static_cast<uint16_t*>(out[0].data),
                    stream);
    else
      launchDropout(mask_, step, rows_.first, rows_.rows, rows_.per_row, in[0].f32(), out[0].f32(),
                    stream);
    return absl::OkStatus();
  }

 private:
  DropoutMask mask_;  // its step is ignored: the kernel reads @step
  DropoutRows rows_;
  bool bf16_;
};

}  // namespace

KernelOr makeDropoutKernel(const KernelInit& init) {
  ASSIGN_OR_RETURN(const bool bf16, dropoutIsBf16(init.node, "CUDA"));
  return std::unique_ptr<CudaKernel>(new DropoutKernel(
      init.ctx, dropoutMaskOf(init.node, init.ctx.seed()), dropoutRowsOf(init.node), bf16));
}

}  // namespace tandem::backend::cuda
