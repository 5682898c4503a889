#pragma once

#include "backend/backend.h"

namespace tandem::backend::cpu {

/// The CPU backend: logical devices cpu:0 ... each with a compute and a comm stream (a
/// worker thread each), host memory, oneDNN and loop kernels, and the local communicator.
const Backend& cpuBackend();

}  // namespace tandem::backend::cpu
