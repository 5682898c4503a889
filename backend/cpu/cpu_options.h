#pragma once

// The CPU backend's own device options (backend::DeviceOptions::backend holds them).

#include "backend/conv_algorithm.h"

namespace tandem::backend::cpu {

struct CpuOptions {
  /// Threads each kernel may use (`--threads-per-device`; one core per device by default,
  /// so N devices on N cores are a fair picture of N GPUs).
  int threads_per_device = 1;
  /// kDirect: no Winograd; kMeasure is kAuto on CPU.
  ConvAlgorithm conv_algorithm = ConvAlgorithm::kAuto;
};

}  // namespace tandem::backend::cpu
