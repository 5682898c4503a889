#pragma once

// The convolution algorithms a device's kernels may choose from (`--conv-algorithm`): a
// word every backend's options share, each reading it its own way.

namespace tandem::backend {

enum class ConvAlgorithm {
  kAuto,     // the fastest measured; on CPU that includes Winograd for many 3x3 stride-1
             // convolutions (errors up to ~3e-6 of the largest magnitude; direct: ~4e-7)
  kDirect,   // direct convolution only (no Winograd)
  kMeasure,  // GPU: every cuDNN algorithm timed once per shape (cudnnFind); CPU: as kAuto
};

}  // namespace tandem::backend
