// Softmax cross-entropy and accuracy: CUDA kernels (not written yet: every factory says so).

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"

namespace tandem::backend::cuda {
namespace {

absl::Status unwritten(const KernelInit& init) {
  return absl::UnimplementedError(
      absl::StrCat(init.node.describe(), " has no CUDA kernel yet"));
}

}  // namespace

KernelOr makeSoftmaxCrossEntropyKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeSoftmaxCrossEntropyBackwardKernel(const KernelInit& init) { return unwritten(init); }
KernelOr makeAccuracyKernel(const KernelInit& init) { return unwritten(init); }

}  // namespace tandem::backend::cuda
