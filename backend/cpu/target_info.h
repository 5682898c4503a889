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

/// Whether this host has oneDNN's avx512_core (AVX-512 F, BW, VL and DQ): its nChw16c
/// layout, its Winograd and its blocked few-channel convolutions are the fast ones then.
bool hostHasAvx512Core();

/// What the compiler may know about CPU devices. Its activations are nChw16c between the
/// kernels that take it (the layout rules); registerTargets makes them plain on a host
/// without AVX-512, where oneDNN would reorder nChw16c into nChw8c anyway. Its convolutions'
/// algorithms are planned by the measured rule of conv_choice.h, for this host.
ir::TargetInfo targetInfo();

}  // namespace tandem::backend::cpu
