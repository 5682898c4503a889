#pragma once

// Bit-level helpers for the own kernels' per-element math (TANDEM_HD: backend/host_device.h),
// compiled for the GPU and by the host tests.

#include <cstdint>
#include <cstring>

#include "backend/host_device.h"

namespace tandem::backend::cuda {

/// The bits of an f32 (std::bit_cast is not usable in device code).
TANDEM_HD uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

TANDEM_HD float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// bf16 as its 16 bits, the same storage as the CPU backend's bf16 and CUDA's
/// __nv_bfloat16; own kernels read and write it through these two functions.
TANDEM_HD float bf16ToFloat(uint16_t bits) { return bitsFloat(static_cast<uint32_t>(bits) << 16); }

/// f32 -> bf16, round to nearest even, NaN stays a quiet NaN: the rounding of
/// backend/bf16.h, so both backends round alike.
TANDEM_HD uint16_t floatToBf16(float f) {
  const uint32_t u = floatBits(f);
  const bool nan = static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000;
  const uint32_t r = nan ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(r >> 16);
}

/// Loads and stores of an element type T (float or uint16_t holding bf16) as float.
TANDEM_HD float load(const float* p, int64_t i) { return p[i]; }
TANDEM_HD float load(const uint16_t* p, int64_t i) { return bf16ToFloat(p[i]); }
TANDEM_HD void store(float* p, int64_t i, float v) { p[i] = v; }
TANDEM_HD void store(uint16_t* p, int64_t i, float v) { p[i] = floatToBf16(v); }

}  // namespace tandem::backend::cuda
