#pragma once

// The CPU backend's own device options, and the backend settings that fill them
// (backend/settings.h): what it registers and reads when it makes a device.

#include "backend/conv_algorithm.h"
#include "backend/settings.h"

namespace tandem::backend::cpu {

struct CpuOptions {
  /// Threads each kernel may use (`--threads-per-device`; one core per device by default,
  /// so N devices on N cores are a fair picture of N GPUs).
  int threads_per_device = 1;
  /// kDirect: no Winograd; kMeasure is kAuto on CPU.
  ConvAlgorithm conv_algorithm = ConvAlgorithm::kAuto;
};

/// The settings the CPU backend reads, one per field of CpuOptions.
inline const OptionsSchema<CpuOptions>& cpuOptions() {
  static const auto* schema =
      &(*new OptionsSchema<CpuOptions>())
           .number("threads_per_device", "CPU threads each device's kernels use",
                   &CpuOptions::threads_per_device, 1, 1024)
           .word("conv_algorithm",
                 "Convolution algorithms: auto, direct (no Winograd) "
                 "or measure (on a CPU as auto)",
                 &CpuOptions::conv_algorithm, convAlgorithmWords());
  return *schema;
}

}  // namespace tandem::backend::cpu
