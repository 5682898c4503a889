#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeMaxPool2dKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeMaxPool2dBackwardKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeAvgPool2dKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeAvgPool2dBackwardKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeGlobalAvgPoolKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }
KernelOr makeGlobalAvgPoolBackwardKernel(const KernelInit& init) { return absl::UnimplementedError("TODO " + init.node.describe()); }

}  // namespace tandem::backend::cpu
