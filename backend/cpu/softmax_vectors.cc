#include "backend/cpu/softmax_vectors.h"

#include "backend/cpu/avx512_rows.h"

namespace tandem::backend::cpu {
namespace {

#if TANDEM_AVX512_INTRINSICS
// GCC 12's AVX-512 headers build max and its reduction on _mm512_undefined_ps(), which
// its own -Wmaybe-uninitialized then flags at every inlined use.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
using avx512::kRowLanes;
using avx512::lanes;

constexpr int kVectors = kSoftmaxVectorRow / kRowLanes;

/// exp(x) for x <= 0 (after the row's maximum is subtracted), Cephes' expf: n = round(x
/// log2 e), r = x - n ln 2 with ln 2 in two parts, e^r = 1 + r + r^2 p(r), times 2^n.
/// Below -104 the result underflows to 0 or the smallest subnormal, as expf's does.
TANDEM_AVX512 inline __m512 expNonPositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(e, n);
}

TANDEM_AVX512 void rowsVectors(const float* x, int64_t rows, int64_t axis, float* y) {
  __mmask16 in[kVectors];
  for (int v = 0; v < kVectors; ++v) in[v] = lanes(0, axis - v * kRowLanes);
  const int vectors = static_cast<int>((axis + kRowLanes - 1) / kRowLanes);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff()),
               pos_inf = _mm512_set1_ps(__builtin_inff());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * axis;
    float* out = y + r * axis;
    __m512 v[kVectors];
    __m512 m = neg_inf;
    __mmask16 bad = 0, live = 0;
    for (int i = 0; i < kVectors; ++i) {
      if (i >= vectors) break;
      v[i] = _mm512_mask_loadu_ps(neg_inf, in[i], row + i * kRowLanes);  // past the row: -inf
      m = _mm512_max_ps(m, v[i]);
      bad |= _mm512_cmp_ps_mask(v[i], pos_inf, _CMP_NLT_UQ);  // NaN or +inf
      live |= _mm512_cmp_ps_mask(v[i], neg_inf, _CMP_NEQ_OQ);
    }
    if (bad != 0 || live == 0) {  // PyTorch's NaN row (softmax_rows.h)
      for (int i = 0; i < vectors; ++i)
        _mm512_mask_storeu_ps(out + i * kRowLanes, in[i], _mm512_set1_ps(__builtin_nanf("")));
      continue;
    }
    const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < kVectors; ++i) {
      if (i >= vectors) break;
      // exp(-inf) is exactly 0 (an element of -inf, and the lanes past the row).
      const __mmask16 finite = _mm512_cmp_ps_mask(v[i], neg_inf, _CMP_NEQ_OQ);
      v[i] = _mm512_maskz_mov_ps(finite, expNonPositive(_mm512_sub_ps(v[i], max)));
      sum = _mm512_add_ps(sum, v[i]);
    }
    // Times 1 / sum, as PyTorch's vectorized softmax and oneDNN's do (a division per
    // element is slower, and within an ulp of it).
    const __m512 scale = _mm512_set1_ps(1.0f / avx512::laneSum(sum));
    for (int i = 0; i < kVectors; ++i) {
      if (i >= vectors) break;
      _mm512_mask_storeu_ps(out + i * kRowLanes, in[i], _mm512_mul_ps(v[i], scale));
    }
  }
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

void softmaxRows(const float* x, int64_t rows, int64_t axis, float* y) {
#if TANDEM_AVX512_INTRINSICS
  rowsVectors(x, rows, axis, y);
#else
  (void)x, (void)rows, (void)axis, (void)y;
#endif
}

}  // namespace tandem::backend::cpu
