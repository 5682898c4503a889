#pragma once

// Philox4x32-R, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel
// random numbers: as easy as 1, 2, 3" (SC 2011), as Random123, cuRAND
// (CURAND_RNG_PSEUDO_PHILOX4_32_10) and JAX's dropout use it: a bijection of a 128-bit
// counter under a 64-bit key, so the number at any position is computed directly from
// where it is, with no state carried from the one before. That is what lets every device
// compute exactly its share of a dropout mask (dropout_mask.h). Written here rather than
// taken from Random123 (not packaged in Debian) or cuRAND (device-only and GPU-only):
// the algorithm is twenty lines, and tests/backend/philox_test.cc checks it against
// Random123's published known-answer vectors.

#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

/// Four 32-bit words: a counter in, four random words out.
struct Philox4x32Block {
  uint32_t x0, x1, x2, x3;
};

/// The 64-bit key as two words.
struct Philox4x32Key {
  uint32_t k0, k1;
};

// The round multipliers and the Weyl sequence that schedules the key (Random123's
// PHILOX_M4x32_0/1 and PHILOX_W32_0/1).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

/// The high and low words of the 64-bit product a * b.
TANDEM_HD void philoxMulHiLo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
#if defined(__CUDA_ARCH__)
  lo = a * b;
  hi = __umulhi(a, b);
#else
  const uint64_t p = static_cast<uint64_t>(a) * b;
  lo = static_cast<uint32_t>(p);
  hi = static_cast<uint32_t>(p >> 32);
#endif
}

/// Philox4x32 with `Rounds` rounds (10 is the generator everyone means; 7 is in the
/// known-answer file too): each round multiplies words 0 and 2, swaps and mixes in the
/// key, which advances by the Weyl constants between rounds.
template <int Rounds = 10>
TANDEM_HD Philox4x32Block philox4x32(Philox4x32Block c, Philox4x32Key k) {
  for (int r = 0; r < Rounds; ++r) {
    if (r > 0) {
      k.k0 += kPhiloxW0;
      k.k1 += kPhiloxW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philoxMulHiLo(kPhiloxM0, c.x0, hi0, lo0);
    philoxMulHiLo(kPhiloxM1, c.x2, hi1, lo1);
    c = {hi1 ^ c.x1 ^ k.k0, lo1, hi0 ^ c.x3 ^ k.k1, lo0};
  }
  return c;
}

}  // namespace tandem::backend
