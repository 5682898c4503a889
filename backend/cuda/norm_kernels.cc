// Batch norm, plain and split for sync batch norm, and its folding: CUDA kernels (not written yet: every factory says so).

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"

namespace tandem::backend::cuda {
namespace {

absl::Status unwritten(const KernelInit& init) {
  return absl::UnimplementedError(
      absl::StrCat(init.node.describe(), " has no CUDA kernel yet"));
}

}  // namespace

KernelOr makeBatchNormKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeBatchNormBackwardKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeBatchNormApplyKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeBatchNormBackwardReduceKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeBatchNormBackwardApplyKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeBatchNormRecomputeKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeFoldBatchNormKernel(const KernelInit& init) { return unwritten(init); }

}  // namespace tandem::backend::cuda
