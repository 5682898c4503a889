#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeConv2dKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeConv2dBackwardDataKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeConv2dBackwardFilterKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
