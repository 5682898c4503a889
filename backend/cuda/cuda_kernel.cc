#include "backend/cuda/cuda_kernel.h"

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/layout_plan.h"

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

KernelOr makeKernel(const ir::Node& node, CudaContext& ctx,
                    const absl::flat_hash_set<const ir::Value*>* nhwc) {
  if (nhwc != nullptr) RETURN_IF_ERROR(checkNhwcSlots(node, *nhwc));
  KernelInit init{node, ctx, nhwc};
  KernelOr kernel = absl::InternalError(absl::StrCat("unknown op in ", node.describe()));
  switch (node.op()) {
#define OP(Enum, name, operands, attrs, traits, doc) \
  case ir::Op::k##Enum:                              \
    kernel = make##Enum##Kernel(init);               \
    break;
#include "ir/ops.def"
#undef OP
  }
  if (kernel.ok()) (*kernel)->setDescription(node.describe());
  return kernel;
}

absl::Status notAKernel(const ir::Node& node) {
  return absl::InternalError(
      absl::StrCat(node.describe(), " has no CUDA kernel: the runtime executes it itself"));
}

cudaStream_t streamHandle(Stream& stream) {
  CudaStream* s = asCudaStream(stream);
  return s != nullptr ? s->handle() : nullptr;
}

// Ops the runtime executes itself: graph inputs, variable reads and collectives.
KernelOr makeInputKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeParamKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeSplitKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeConcatKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeBroadcastKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeAllReduceKernel(const KernelInit& init) { return notAKernel(init.node); }

}  // namespace tandem::backend::cuda
