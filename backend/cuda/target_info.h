#pragma once

// The CUDA target's facts (target_info.cc), known in every build.

#include <cstdint>

#include "ir/target.h"

namespace tandem::backend::cuda {

/// What cudaMalloc gives and cuDNN's and the vector kernels' loads want.
inline constexpr int64_t kAlignment = 256;

/// What the compiler may know about CUDA devices.
ir::TargetInfo targetInfo();

}  // namespace tandem::backend::cuda
