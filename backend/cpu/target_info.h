#pragma once

// The CPU target's facts (target_info.cc): plain C++, so that compiler-only programs
// (passes_bench) know them without the CPU backend.

#include <cstdint>

#include "ir/target.h"

namespace tandem::backend::cpu {

/// Cache line; also what oneDNN's and AVX-512's aligned loads like.
inline constexpr int64_t kAlignment = 64;

/// Channels per block of the blocked layout, nChw16c (AVX-512's 16 floats).
inline constexpr int64_t kChannelBlock = 16;

/// What the compiler may know about CPU devices. Its activations are nChw16c between the
/// kernels that take it (the layout rules); registerTargets makes them plain on a host
/// without AVX-512, where oneDNN would reorder nChw16c into nChw8c anyway.
ir::TargetInfo targetInfo();

}  // namespace tandem::backend::cpu
