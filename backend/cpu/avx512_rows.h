#pragma once

// What the AVX-512 row loops share (im2col.cc's rows, tap_conv.cc, avg_pool_rows.cc):
// whether they run here, and, where TANDEM_AVX512_INTRINSICS (vector_loops.h), that a row
// of at most 32 floats is two 16-lane vectors and a mask says which lanes are columns of
// it (functions for TANDEM_AVX512 code only).

#include <algorithm>
#include <cstdint>

#include "backend/cpu/target_info.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {

/// Whether TANDEM_AVX512 code runs here: built with the intrinsics, on a host with
/// AVX-512 (oneDNN's avx512_core).
inline bool avx512Runs() {
#if TANDEM_AVX512_INTRINSICS
  static const bool host = hostHasAvx512Core();
  return host;
#else
  return false;
#endif
}

}  // namespace tandem::backend::cpu

#if TANDEM_AVX512_INTRINSICS
#include <immintrin.h>

namespace tandem::backend::cpu::avx512 {

inline constexpr int64_t kRowLanes = 16;               // f32 in a vector
inline constexpr int64_t kRowColumns = 2 * kRowLanes;  // the widest row the loops take

/// The lanes [from, to) of a vector, clamped to [0, 16).
TANDEM_AVX512 inline __mmask16 lanes(int64_t from, int64_t to) {
  from = std::clamp<int64_t>(from, 0, kRowLanes);
  to = std::clamp<int64_t>(to, from, kRowLanes);
  return static_cast<__mmask16>(((1u << to) - 1u) & ~((1u << from) - 1u));
}

/// The sum of a vector's 16 lanes, pairwise: lane i + lane i + 8, then + 4, + 2, + 1 (the
/// order of GCC's _mm512_reduce_add_ps, whose header trips GCC 12's own
/// -Wmaybe-uninitialized).
TANDEM_AVX512 inline float laneSum(__m512 v) {
  alignas(64) float l[kRowLanes];
  _mm512_store_ps(l, v);
  for (int64_t width = kRowLanes / 2; width > 0; width /= 2)
    for (int64_t i = 0; i < width; ++i) l[i] += l[i + width];
  return l[0];
}

/// relu as unary_math.h's reluValue: x < 0 ? 0 : x (NaN and -0.0 pass).
TANDEM_AVX512 inline __m512 relu(__m512 x) {
  return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                            _mm512_setzero_ps());
}

/// relu_backward as unary_math.h's reluBackwardValue: y <= 0 ? 0 : dy (a NaN y passes dy).
TANDEM_AVX512 inline __m512 reluBackward(__m512 dy, __m512 y) {
  return _mm512_mask_mov_ps(dy, _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LE_OQ),
                            _mm512_setzero_ps());
}

/// `p` moved by `floats`, which may point outside its row where only masked-off lanes
/// read: integer arithmetic, as a pointer outside its array may not be formed.
inline const float* moved(const float* p, int64_t floats) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(p) +
                                        static_cast<uintptr_t>(floats * int64_t{sizeof(float)}));
}

}  // namespace tandem::backend::cpu::avx512

#endif
