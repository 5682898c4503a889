#include "backend/cpu/tap_filter.h"

#include <algorithm>
#include <cstdint>

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/target_info.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

#if TANDEM_AVX512_INTRINSICS
using avx512::kRowLanes;
using avx512::lanes;
using avx512::moved;

/// Taps summed at once: each holds an accumulator per vector of the output row (two for
/// LeNet's 26 columns), so 9 taps keep 18 of the 32 registers, dy's row two more.
constexpr int kTapsAtOnce = 9;

/// One tap of the filter: where its x rows start relative to an output row's, and which
/// lanes of each output vector read x rather than padding.
struct Tap {
  int64_t c, kh;
  int64_t shift;  // output column j reads x column j + shift
  __mmask16 reads[2];
};

/// The sum of a vector's 16 lanes, pairwise (halves, then quarters, ...). Through memory:
/// GCC 12's _mm512_reduce_add_ps trips its own -Wmaybe-uninitialized.
TANDEM_AVX512 inline float laneSum(__m512 v) {
  alignas(64) float l[kRowLanes];
  _mm512_store_ps(l, v);
  for (int64_t width = kRowLanes / 2; width > 0; width /= 2)
    for (int64_t i = 0; i < width; ++i) l[i] += l[i + width];
  return l[0];
}

/// dw of `count` taps of output channel o, and (with `db`) its bias: every image's every
/// output row, dy's row loaded once and multiplied with each tap's x row.
template <int kVectors>
TANDEM_AVX512 void sumTaps(const ConvWindow& g, int64_t n, int64_t o, int64_t outputs,
                           const float* x, const float* dy, const Tap* taps, int count, float* dw,
                           float* db) {
  __m512 acc[kTapsAtOnce][kVectors], bias[kVectors];
  for (int t = 0; t < kTapsAtOnce; ++t)
    for (int v = 0; v < kVectors; ++v) acc[t][v] = _mm512_setzero_ps();
  for (int v = 0; v < kVectors; ++v) bias[v] = _mm512_setzero_ps();
  const __mmask16 row[2] = {lanes(0, g.ow), lanes(0, g.ow - kRowLanes)};
  const int64_t plane = g.h * g.w, image = g.c * plane;
  for (int64_t i = 0; i < n; ++i) {
    const float* dy_rows = dy + (i * outputs + o) * g.oh * g.ow;
    const float* x_image = x + i * image;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      __m512 d[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        d[v] = _mm512_maskz_loadu_ps(row[v], dy_rows + oh * g.ow + v * kRowLanes);
        if (db != nullptr) bias[v] = _mm512_add_ps(bias[v], d[v]);
      }
      for (int t = 0; t < kTapsAtOnce; ++t) {
        if (t >= count) break;
        const Tap& tap = taps[t];
        const int64_t ih = oh * g.stride_h - g.pad_h + tap.kh;
        if (ih < 0 || ih >= g.h) continue;  // a padding row adds nothing
        const float* x_row = x_image + tap.c * plane + ih * g.w;
        for (int v = 0; v < kVectors; ++v) {
          const __m512 xv =
              _mm512_maskz_loadu_ps(tap.reads[v], moved(x_row, v * kRowLanes + tap.shift));
          // dy's lanes over padding are zeroed with x's: 0 * a NaN or inf of dy is never
          // added, as a direct convolution never multiplies padding. (A merge-masked
          // multiply-add into acc instead ran at half the speed.)
          acc[t][v] = _mm512_fmadd_ps(_mm512_maskz_mov_ps(tap.reads[v], d[v]), xv, acc[t][v]);
        }
      }
    }
  }
  for (int t = 0; t < count; ++t) {
    __m512 sum = acc[t][0];
    for (int v = 1; v < kVectors; ++v) sum = _mm512_add_ps(sum, acc[t][v]);
    dw[t] = laneSum(sum);
  }
  if (db != nullptr) {
    __m512 sum = bias[0];
    for (int v = 1; v < kVectors; ++v) sum = _mm512_add_ps(sum, bias[v]);
    *db = laneSum(sum);
  }
}

TANDEM_AVX512 void tapFilterVectors(const ConvWindow& g, int64_t n, int64_t o, const float* x,
                                    const float* dy, float* dw, float* db) {
  const int64_t taps_per_filter = g.rows();
#pragma omp parallel for schedule(static)
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t first = 0; first < taps_per_filter; first += kTapsAtOnce) {
      Tap taps[kTapsAtOnce];
      const int count = static_cast<int>(std::min<int64_t>(kTapsAtOnce, taps_per_filter - first));
      for (int t = 0; t < count; ++t) {
        const int64_t r = first + t, kw = r % g.kw;  // r = (c * kh + kh) * kw + kw
        taps[t].c = r / (g.kh * g.kw);
        taps[t].kh = r / g.kw % g.kh;
        taps[t].shift = kw - g.pad_w;
        for (int64_t v = 0; v < 2; ++v) {
          const int64_t j = v * kRowLanes;  // lane l: output column j + l, x column j + l + shift
          taps[t].reads[v] =
              lanes(-taps[t].shift - j, g.w - taps[t].shift - j) & lanes(0, g.ow - j);
        }
      }
      float* dw_taps = dw + oc * taps_per_filter + first;
      float* db_oc = db != nullptr && first == 0 ? db + oc : nullptr;
      if (g.ow > kRowLanes) {
        sumTaps<2>(g, n, oc, o, x, dy, taps, count, dw_taps, db_oc);
      } else {
        sumTaps<1>(g, n, oc, o, x, dy, taps, count, dw_taps, db_oc);
      }
    }
}
#endif

class TapFilterKernel final : public CpuKernel {
 public:
  TapFilterKernel(const ConvWindow& g, int64_t n, int64_t o, bool bias)
      : g_(g), n_(n), o_(o), bias_(bias) {}

 private:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    tapFilterGradient(g_, n_, o_, in[1].f32(), in[0].f32(), out[0].f32(),
                      bias_ ? out[1].f32() : nullptr);
  }
  ConvWindow g_;
  int64_t n_, o_;
  bool bias_;
};

}  // namespace

bool tapFilterRuns() {
#if TANDEM_AVX512_INTRINSICS
  static const bool avx512 = hostHasAvx512Core();
  return avx512;
#else
  return false;
#endif
}

void tapFilterGradient(const ConvWindow& g, int64_t n, int64_t o, const float* x, const float* dy,
                       float* dw, float* db) {
#if TANDEM_AVX512_INTRINSICS
  tapFilterVectors(g, n, o, x, dy, dw, db);
#else
  (void)g, (void)n, (void)o, (void)x, (void)dy, (void)dw, (void)db;
#endif
}

std::unique_ptr<CpuKernel> makeTapFilterKernel(const ConvWindow& g, int64_t n, int64_t o,
                                               bool bias) {
  return std::make_unique<TapFilterKernel>(g, n, o, bias);
}

}  // namespace tandem::backend::cpu
