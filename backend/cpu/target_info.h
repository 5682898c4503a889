#pragma once

// The CPU target's facts (target_info.cc): plain C++, so that compiler-only programs
// (passes_bench) know them without the CPU backend.

#include <cstdint>

#include "ir/target.h"

namespace tandem::backend::cpu {

/// Cache line; also what oneDNN's and AVX-512's aligned loads like.
inline constexpr int64_t kAlignment = 64;

/// What the compiler may know about CPU devices.
ir::TargetInfo targetInfo();

}  // namespace tandem::backend::cpu
