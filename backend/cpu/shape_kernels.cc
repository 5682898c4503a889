#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeFlattenKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeFlattenBackwardKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
