#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeSoftmaxCrossEntropyKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeSoftmaxCrossEntropyBackwardKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeAccuracyKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
