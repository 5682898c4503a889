#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeConstantKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeInitializeKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeAssignKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
