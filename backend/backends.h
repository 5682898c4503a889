#pragma once

// The backends of this build, registered by one call: what a program that runs modules
// (the CLI, the public API's library, tests) calls before it compiles. The runtime links
// only the backend API (backend.h) and asks the registry; whoever makes the program links
// the backends (the library tandem_backends).

namespace tandem::backend {

/// Registers every backend this build has, each under its kind's name with its target
/// facts (ir/target.h) and the settings it reads (settings.h): the CPU backend, and the
/// CUDA backend when the build has it; the CUDA target's facts and settings also without
/// it (the compiler compiles for cuda devices anywhere, and a front end's CUDA settings
/// stay legal). Explicit calls rather than static registration objects, which a static
/// library drops. Idempotent.
void registerBackends();

}  // namespace tandem::backend
