// Pooling: CUDA kernels (not written yet: every factory says so).

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"

namespace tandem::backend::cuda {
namespace {

absl::Status unwritten(const KernelInit& init) {
  return absl::UnimplementedError(
      absl::StrCat(init.node.describe(), " has no CUDA kernel yet"));
}

}  // namespace

KernelOr makeMaxPool2dKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeAvgPool2dKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeMaxPool2dBackwardKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeAvgPool2dBackwardKernel(const KernelInit& init) { return unwritten(init); }

}  // namespace tandem::backend::cuda
