#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeReluKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeReluBackwardKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeAddKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
