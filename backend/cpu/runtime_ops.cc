// Ops the runtime executes without a kernel: graph inputs (the host's batch), `param`
// (a view of the variable's storage) and the collectives (a Communicator on the comm
// stream).

#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

KernelOr makeInputKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeParamKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeSplitKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeConcatKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeBroadcastKernel(const KernelInit& init) { return notAKernel(init.node); }
KernelOr makeAllReduceKernel(const KernelInit& init) { return notAKernel(init.node); }

}  // namespace tandem::backend::cpu
