#pragma once

// The CUDA backend's own device options (backend::DeviceOptions::backend holds them).
// Plain C++: the CLI sets them in builds without the CUDA backend too.

#include "backend/conv_algorithm.h"

namespace tandem::backend::cuda {

struct CudaOptions {
  /// Whether f32 matrix products and convolutions may round their inputs to TF32 on GPUs
  /// with tensor cores (`--no-tf32`: false).
  bool allow_tf32 = true;
  /// kMeasure: every cuDNN algorithm timed once per shape (cudnnFind); else cuDNN's
  /// heuristics.
  ConvAlgorithm conv_algorithm = ConvAlgorithm::kAuto;
};

}  // namespace tandem::backend::cuda
