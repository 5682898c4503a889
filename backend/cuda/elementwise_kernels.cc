// Sources, elementwise ops, casts and reshapes: CUDA kernels (not written yet: every factory says so).

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"

namespace tandem::backend::cuda {
namespace {

absl::Status unwritten(const KernelInit& init) {
  return absl::UnimplementedError(
      absl::StrCat(init.node.describe(), " has no CUDA kernel yet"));
}

}  // namespace

KernelOr makeConstantKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeInitializeKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeAssignKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeReluKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeReluBackwardKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeAddKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeCastKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeFlattenKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeFlattenBackwardKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeGlobalAvgPoolKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeGlobalAvgPoolBackwardKernel(const KernelInit& init) { return unwritten(init); }

}  // namespace tandem::backend::cuda
