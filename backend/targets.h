#pragma once

// The facts of every device kind this build knows (ir/target.h), without the backends:
// what compiler-only programs register (the registry's registerBackends does too).

namespace tandem::backend {

/// Registers the CPU and CUDA targets' facts (backend/{cpu,cuda}/target_info.cc), the
/// CUDA target's also in a build without the CUDA backend. Idempotent.
void registerTargets();

}  // namespace tandem::backend
