#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeBatchNormKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeBatchNormBackwardKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
