#include "backend/cpu/avg_pool_rows.h"

#include <algorithm>
#include <cstdint>

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

#if TANDEM_AVX512_INTRINSICS
using avx512::kRowLanes;
using avx512::lanes;
using avx512::moved;
using avx512::relu;
using avx512::reluBackward;

/// Input columns [2 j0, 2 j0 + 32) of a row as two vectors: zeros past the row's end.
template <bool kRelu>
TANDEM_AVX512 inline void loadPair(const float* row, int64_t w, int64_t j0, __m512& lo,
                                   __m512& hi) {
  const int64_t c0 = 2 * j0;
  lo = _mm512_maskz_loadu_ps(lanes(0, w - c0), row + c0);
  hi = _mm512_maskz_loadu_ps(lanes(0, w - c0 - kRowLanes), moved(row, c0 + kRowLanes));
  if (kRelu) {
    lo = relu(lo);
    hi = relu(hi);
  }
}

template <bool kRelu>
TANDEM_AVX512 void forwardRows(int64_t planes, int64_t h, int64_t w, const float* x, float* y) {
  const int64_t oh = h / 2, ow = w / 2;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512 quarter = _mm512_set1_ps(0.25f);
  for (int64_t p = 0; p < planes; ++p) {
    const float* plane = x + p * h * w;
    float* out = y + p * oh * ow;
    for (int64_t i = 0; i < oh; ++i) {
      const float* r0 = plane + 2 * i * w;
      const float* r1 = r0 + w;
      for (int64_t j0 = 0; j0 < ow; j0 += kRowLanes) {
        __m512 a0, a1, b0, b1;
        loadPair<kRelu>(r0, w, j0, a0, a1);
        loadPair<kRelu>(r1, w, j0, b0, b1);
        const __mmask16 all = 0xFFFF;
        // Window j: (r0[2j] + r0[2j+1]) + (r1[2j] + r1[2j+1]), the scalar loop's order.
        const __m512 top = _mm512_add_ps(_mm512_maskz_permutex2var_ps(all, a0, even, a1),
                                         _mm512_maskz_permutex2var_ps(all, a0, odd, a1));
        const __m512 bottom = _mm512_add_ps(_mm512_maskz_permutex2var_ps(all, b0, even, b1),
                                            _mm512_maskz_permutex2var_ps(all, b0, odd, b1));
        _mm512_mask_storeu_ps(out + i * ow + j0, lanes(0, ow - j0),
                              _mm512_mul_ps(_mm512_add_ps(top, bottom), quarter));
      }
    }
  }
}

template <bool kRelu>
TANDEM_AVX512 void backwardRows(int64_t planes, int64_t h, int64_t w, const float* dy,
                                const float* x, float* dx) {
  const int64_t oh = h / 2, ow = w / 2;
  // Lane l of the low (high) half of a row pair's 32 columns takes window l / 2 (8 + l / 2).
  const __m512i low = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i high = _mm512_add_epi32(low, _mm512_set1_epi32(8));
  const __m512 quarter = _mm512_set1_ps(0.25f);
  for (int64_t p = 0; p < planes; ++p) {
    const float* g = dy + p * oh * ow;
    const float* plane = x + p * h * w;
    float* out = dx + p * h * w;
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j0 = 0; j0 < ow; j0 += kRowLanes) {
        const __m512 v =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(0, ow - j0), g + i * ow + j0), quarter);
        const __m512 lo = _mm512_maskz_permutexvar_ps(0xFFFF, low, v);
        const __m512 hi = _mm512_maskz_permutexvar_ps(0xFFFF, high, v);
        // The columns windows cover: 2 ow (an odd last column is no window's).
        const int64_t c0 = 2 * j0;
        const __mmask16 m_lo = lanes(0, 2 * ow - c0), m_hi = lanes(0, 2 * ow - c0 - kRowLanes);
        for (int64_t r = 2 * i; r < 2 * i + 2; ++r) {
          __m512 s_lo = lo, s_hi = hi;
          if (kRelu) {
            const float* xr = plane + r * w;
            s_lo = reluBackward(lo, _mm512_maskz_loadu_ps(m_lo, xr + c0));
            s_hi = reluBackward(hi, _mm512_maskz_loadu_ps(m_hi, moved(xr, c0 + kRowLanes)));
          }
          float* row = out + r * w;
          _mm512_mask_storeu_ps(row + c0, m_lo, s_lo);
          _mm512_mask_storeu_ps(row + c0 + kRowLanes, m_hi, s_hi);
        }
      }
    // What no window covers gets no gradient.
    if (w % 2 == 1)
      for (int64_t r = 0; r < 2 * oh; ++r) out[r * w + w - 1] = 0.0f;
    if (h % 2 == 1) std::fill(out + (h - 1) * w, out + h * w, 0.0f);
  }
}
#endif

}  // namespace

void avgPool2x2Rows(int64_t planes, int64_t h, int64_t w, bool relu, const float* x, float* y) {
#if TANDEM_AVX512_INTRINSICS
  if (relu) {
    forwardRows<true>(planes, h, w, x, y);
  } else {
    forwardRows<false>(planes, h, w, x, y);
  }
#else
  (void)planes, (void)h, (void)w, (void)relu, (void)x, (void)y;
#endif
}

void avgPool2x2BackwardRows(int64_t planes, int64_t h, int64_t w, bool relu, const float* dy,
                            const float* x, float* dx) {
#if TANDEM_AVX512_INTRINSICS
  if (relu) {
    backwardRows<true>(planes, h, w, dy, x, dx);
  } else {
    backwardRows<false>(planes, h, w, dy, x, dx);
  }
#else
  (void)planes, (void)h, (void)w, (void)relu, (void)dy, (void)x, (void)dx;
#endif
}

}  // namespace tandem::backend::cpu
