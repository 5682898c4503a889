#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeSgdUpdateKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
