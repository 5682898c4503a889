#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/cpu_options.h"
#include "backend/cpu/target_info.h"

namespace tandem::backend::cpu {

/// The CPU backend: logical devices cpu:0 ... each with a compute and a comm stream (a
/// worker thread each), host memory, oneDNN and loop kernels, and the local communicator.
/// Its own options are CpuOptions, read from the run's settings (cpuOptions()).
const Backend& cpuBackend();

}  // namespace tandem::backend::cpu
