#pragma once

// The CUDA backend's own device options, and the backend settings that fill them
// (backend/settings.h). Plain C++: every build registers them (backend/backends.cc), so a
// front end's settings for CUDA devices are legal in builds without the CUDA backend too.

#include "backend/conv_algorithm.h"
#include "backend/settings.h"

namespace tandem::backend::cuda {

struct CudaOptions {
  /// Whether f32 matrix products and convolutions may round their inputs to TF32 on GPUs
  /// with tensor cores (`--no-tf32`: false).
  bool allow_tf32 = true;
  /// kMeasure: every cuDNN algorithm timed once per shape (cudnnFind); else cuDNN's
  /// heuristics.
  ConvAlgorithm conv_algorithm = ConvAlgorithm::kAuto;
};

/// The settings the CUDA backend reads, one per field of CudaOptions.
inline const OptionsSchema<CudaOptions>& cudaOptions() {
  static const auto* schema =
      &(*new OptionsSchema<CudaOptions>())
           .flag("allow_tf32",
                 "Whether f32 convolutions and matrix products may round their inputs to TF32 "
                 "on tensor cores",
                 &CudaOptions::allow_tf32)
           .word("conv_algorithm",
                 "Convolution algorithms: auto (cuDNN's heuristics), direct or measure (every "
                 "cuDNN algorithm timed once per shape)",
                 &CudaOptions::conv_algorithm, convAlgorithmWords());
  return *schema;
}

}  // namespace tandem::backend::cuda
