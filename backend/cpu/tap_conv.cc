#include "backend/cpu/tap_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cpu/avg_pool_rows.h"
#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

#if TANDEM_AVX512_INTRINSICS
using avx512::kRowLanes;
using avx512::lanes;
using avx512::laneSum;
using avx512::moved;

/// Taps summed at once: each holds an accumulator per vector of the output row (two for
/// LeNet's 26 columns), so 9 taps keep 18 of the 32 registers, dy's row two more.
constexpr int kTapsAtOnce = 9;
static_assert(kConvReluPoolTaps == kTapsAtOnce);

/// One tap of the filter: where its x rows start relative to an output row's, and which
/// lanes of each output vector read x rather than padding.
struct Tap {
  int64_t c, kh;
  int64_t shift;   // output column j reads x column j + shift
  int64_t offset;  // without padding: x's element for an output row's first, from its row
  __mmask16 reads[2];
};

/// The window's taps in the filter's order, r = (c * kh + kh) * kw + kw, padded with
/// empty taps (no lanes read) to a whole number of groups of kTapsAtOnce.
TANDEM_AVX512 std::vector<Tap> tapsOf(const ConvWindow& g) {
  const int64_t taps = g.rows(), groups = (taps + kTapsAtOnce - 1) / kTapsAtOnce;
  std::vector<Tap> out(static_cast<size_t>(groups * kTapsAtOnce), Tap{});
  for (int64_t r = 0; r < taps; ++r) {
    Tap& tap = out[static_cast<size_t>(r)];
    tap.c = r / (g.kh * g.kw);
    tap.kh = r / g.kw % g.kh;
    tap.shift = r % g.kw - g.pad_w;
    tap.offset = (tap.c * g.h + tap.kh) * g.w + tap.shift;
    for (int64_t v = 0; v < 2; ++v) {
      const int64_t j = v * kRowLanes;  // lane l: output column j + l, x column j + l + shift
      tap.reads[v] = lanes(-tap.shift - j, g.w - tap.shift - j) & lanes(0, g.ow - j);
    }
  }
  return out;
}

/// The running sums of one output channel's group of taps, a vector per output vector of
/// a row, and of its bias. Floats, not __m512: a std::vector of __m512 was not given its
/// 64-byte alignment here.
struct TapSums {
  float taps[kTapsAtOnce][2][kRowLanes];
  float bias[2][kRowLanes];
};

/// Adds one image to `sums`: every output row of dy's plane `dy_plane` (one channel), its
/// row loaded once and multiplied with each tap's x row of `x_image`.
template <int kVectors>
TANDEM_AVX512 void addImage(const ConvWindow& g, const float* x_image, const float* dy_plane,
                            const Tap* taps, int count, bool bias, TapSums& sums) {
  __m512 acc[kTapsAtOnce][kVectors], b[kVectors];
  for (int t = 0; t < kTapsAtOnce; ++t)
    for (int v = 0; v < kVectors; ++v) acc[t][v] = _mm512_loadu_ps(sums.taps[t][v]);
  for (int v = 0; v < kVectors; ++v) b[v] = _mm512_loadu_ps(sums.bias[v]);
  const __mmask16 row[2] = {lanes(0, g.ow), lanes(0, g.ow - kRowLanes)};
  const int64_t plane = g.h * g.w;
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    __m512 d[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      d[v] = _mm512_maskz_loadu_ps(row[v], dy_plane + oh * g.ow + v * kRowLanes);
      if (bias) b[v] = _mm512_add_ps(b[v], d[v]);
    }
    // Every tap of the group, unrolled so that the sums stay in registers: a tap past the
    // group's count, or whose x row is padding, reads no lane and adds zeros.
#pragma GCC unroll 9
    for (int t = 0; t < kTapsAtOnce; ++t) {
      const Tap& tap = taps[t];
      const int64_t ih = oh * g.stride_h - g.pad_h + tap.kh;
      const bool inside = t < count && ih >= 0 && ih < g.h;
      const float* x_row = x_image + tap.c * plane + (inside ? ih : 0) * g.w;
#pragma GCC unroll 2
      for (int v = 0; v < kVectors; ++v) {
        const __mmask16 reads = inside ? tap.reads[v] : 0;
        const __m512 xv = _mm512_maskz_loadu_ps(reads, moved(x_row, v * kRowLanes + tap.shift));
        // dy's lanes over padding are zeroed with x's: 0 * a NaN or inf of dy is never
        // added, as a direct convolution never multiplies padding. (A merge-masked
        // multiply-add into acc instead ran at half the speed.)
        acc[t][v] = _mm512_fmadd_ps(_mm512_maskz_mov_ps(reads, d[v]), xv, acc[t][v]);
      }
    }
  }
  for (int t = 0; t < kTapsAtOnce; ++t)
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(sums.taps[t][v], acc[t][v]);
  for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(sums.bias[v], b[v]);
}

/// addImage for a full group of taps over a window without padding, where every tap
/// reads whole rows: no per-tap masks or bounds (those cost more than the multiply-adds,
/// perf on LeNet's conv1), x at each tap's offset from an output row's first input element.
template <int kVectors>
TANDEM_AVX512 void addImageInside(const ConvWindow& g, const float* x_image, const float* dy_plane,
                                  const Tap* taps, bool bias, TapSums& sums) {
  __m512 acc[kTapsAtOnce][kVectors], b[kVectors];
  for (int t = 0; t < kTapsAtOnce; ++t)
    for (int v = 0; v < kVectors; ++v) acc[t][v] = _mm512_loadu_ps(sums.taps[t][v]);
  for (int v = 0; v < kVectors; ++v) b[v] = _mm512_loadu_ps(sums.bias[v]);
  const __mmask16 row[2] = {lanes(0, g.ow), lanes(0, g.ow - kRowLanes)};
  int64_t off[kTapsAtOnce];  // in registers through the unrolled loop below
  for (int t = 0; t < kTapsAtOnce; ++t) off[t] = taps[t].offset;
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    __m512 d[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      d[v] = _mm512_maskz_loadu_ps(row[v], dy_plane + oh * g.ow + v * kRowLanes);
      if (bias) b[v] = _mm512_add_ps(b[v], d[v]);
    }
    const float* x_rows = x_image + oh * g.stride_h * g.w;
#pragma GCC unroll 9
    for (int t = 0; t < kTapsAtOnce; ++t)
#pragma GCC unroll 2
      for (int v = 0; v < kVectors; ++v) {
        // Lanes past the output row read nothing: their dy is 0, and x there may be inf.
        const __m512 xv = _mm512_maskz_loadu_ps(row[v], x_rows + off[t] + v * kRowLanes);
        acc[t][v] = _mm512_fmadd_ps(d[v], xv, acc[t][v]);
      }
  }
  for (int t = 0; t < kTapsAtOnce; ++t)
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(sums.taps[t][v], acc[t][v]);
  for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(sums.bias[v], b[v]);
}

/// The forward of one image over the taps [first, first + count) of every filter: each
/// output row's x vectors of those taps are loaded once and shared by the output
/// channels; the rows' partial sums (of the taps before `first`) are read back from y,
/// and the last group adds the bias.
template <int kVectors>
TANDEM_AVX512 void forwardImage(const ConvWindow& g, int64_t o, const float* x_image,
                                const float* w, const float* b, const Tap* taps, int64_t first,
                                int count, bool last, float* y_image) {
  const __mmask16 row[2] = {lanes(0, g.ow), lanes(0, g.ow - kRowLanes)};
  const int64_t per_filter = g.rows(), plane = g.oh * g.ow;
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    const float* x_rows = x_image + oh * g.stride_h * g.w;
    __m512 xv[kTapsAtOnce][kVectors];
#pragma GCC unroll 9
    for (int t = 0; t < kTapsAtOnce; ++t)
#pragma GCC unroll 2
      for (int v = 0; v < kVectors; ++v)
        xv[t][v] = t < count
                       ? _mm512_maskz_loadu_ps(row[v], x_rows + taps[t].offset + v * kRowLanes)
                       : _mm512_setzero_ps();
    for (int64_t oc = 0; oc < o; ++oc) {
      float* y_row = y_image + oc * plane + oh * g.ow;
      const float* w_o = w + oc * per_filter + first;
      __m512 acc[kVectors];
      for (int v = 0; v < kVectors; ++v)
        acc[v] =
            first == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(row[v], y_row + v * kRowLanes);
#pragma GCC unroll 9
      for (int t = 0; t < kTapsAtOnce; ++t) {
        if (t >= count) break;
        const __m512 wt = _mm512_set1_ps(w_o[t]);
#pragma GCC unroll 2
        for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_fmadd_ps(wt, xv[t][v], acc[v]);
      }
      if (last && b != nullptr)
        for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_add_ps(acc[v], _mm512_set1_ps(b[oc]));
      for (int v = 0; v < kVectors; ++v)
        _mm512_mask_storeu_ps(y_row + v * kRowLanes, row[v], acc[v]);
    }
  }
}

/// One image's convolution of `o` output channels (w and b at the first of them) into
/// y_image [o, oh, ow]: every group of taps in turn, the last adding the bias.
TANDEM_AVX512 void forwardImageAllTaps(const ConvWindow& g, const std::vector<Tap>& table,
                                       int64_t o, const float* x_image, const float* w,
                                       const float* b, float* y_image) {
  const int64_t taps = g.rows();
  for (int64_t first = 0; first < taps; first += kTapsAtOnce) {
    const int count = static_cast<int>(std::min<int64_t>(kTapsAtOnce, taps - first));
    const bool last = first + count == taps;
    if (g.ow > kRowLanes) {
      forwardImage<2>(g, o, x_image, w, b, table.data() + first, first, count, last, y_image);
    } else {
      forwardImage<1>(g, o, x_image, w, b, table.data() + first, first, count, last, y_image);
    }
  }
}

/// Every image, the OpenMP threads (threads_per_device) splitting the batch.
TANDEM_AVX512 void tapForwardVectors(const ConvWindow& g, int64_t n, int64_t o, const float* x,
                                     const float* w, const float* b, float* y) {
  const std::vector<Tap> table = tapsOf(g);
  const int64_t image = g.c * g.h * g.w, outputs = o * g.oh * g.ow;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    forwardImageAllTaps(g, table, o, x + i * image, w, b, y + i * outputs);
}

/// The sum of a tap's (or the bias's) vectors: vectors added, then their lanes.
TANDEM_AVX512 float total(const float (*v)[kRowLanes], int vectors) {
  __m512 sum = _mm512_loadu_ps(v[0]);
  for (int i = 1; i < vectors; ++i) sum = _mm512_add_ps(sum, _mm512_loadu_ps(v[i]));
  return laneSum(sum);
}

/// conv2d_relu_avg_pool's filter gradient over one image and output channel, a row at a
/// time in registers, for at most kTapsAtOnce taps over a window without padding: the
/// pooled gradient's shares of the row (dy * 0.25 widened to each 2x2 window as
/// avgPool2x2BackwardRows widens it) where relu's mask (a row an i32) has its bit, zero in
/// an odd last row or column, and the taps' products with that added to `sums`
/// (addImageInside's). Their bits, with neither the convolution's output nor its gradient
/// in memory. A loop of its own, beside addImageInside's: one row loop over either source
/// of the row's gradient (a functor) left GCC keeping the 18 sums in memory, 1.2 ms against
/// 0.8 for both kernels (cpu_kernels_bench's TapFilter and ConvReluPool).
template <int kVectors>
TANDEM_AVX512 void addPooledImage(const ConvWindow& g, const float* x_image,
                                  const int32_t* mask_plane, const float* dp_plane, const Tap* taps,
                                  int count, bool bias, TapSums& sums) {
  __m512 acc[kTapsAtOnce][kVectors], bsum[kVectors];
  for (int t = 0; t < kTapsAtOnce; ++t)
    for (int v = 0; v < kVectors; ++v) acc[t][v] = _mm512_loadu_ps(sums.taps[t][v]);
  for (int v = 0; v < kVectors; ++v) bsum[v] = _mm512_loadu_ps(sums.bias[v]);
  const __mmask16 row[2] = {lanes(0, g.ow), lanes(0, g.ow - kRowLanes)};
  const int64_t ph = g.oh / 2, pw = g.ow / 2;
  // The columns windows cover (2 pw); lane l of a row's vector v takes window (16 v + l) / 2.
  const __mmask16 covered[2] = {lanes(0, 2 * pw), lanes(0, 2 * pw - kRowLanes)};
  const __m512i share[2] = {
      _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
      _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8)};
  const __m512 quarter = _mm512_set1_ps(0.25f);
  int64_t off[kTapsAtOnce];
  for (int t = 0; t < kTapsAtOnce; ++t) off[t] = taps[t].offset;
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    __m512 d[kVectors];
    if (oh < 2 * ph) {
      const __m512 pooled =
          _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(0, pw), dp_plane + (oh / 2) * pw), quarter);
      const auto bits = static_cast<uint32_t>(mask_plane[oh]);
      for (int v = 0; v < kVectors; ++v) {
        const auto passes = static_cast<__mmask16>(bits >> (v * kRowLanes)) & covered[v];
        d[v] = _mm512_maskz_permutexvar_ps(passes, share[v], pooled);
      }
    } else {
      for (int v = 0; v < kVectors; ++v) d[v] = _mm512_setzero_ps();  // no window's row
    }
    for (int v = 0; v < kVectors; ++v)
      if (bias) bsum[v] = _mm512_add_ps(bsum[v], d[v]);
    const float* x_rows = x_image + oh * g.stride_h * g.w;
#pragma GCC unroll 9
    for (int t = 0; t < kTapsAtOnce; ++t) {
      if (t >= count) break;
#pragma GCC unroll 2
      for (int v = 0; v < kVectors; ++v) {
        const __m512 xv = _mm512_maskz_loadu_ps(row[v], x_rows + off[t] + v * kRowLanes);
        acc[t][v] = _mm512_fmadd_ps(d[v], xv, acc[t][v]);
      }
    }
  }
  for (int t = 0; t < kTapsAtOnce; ++t)
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(sums.taps[t][v], acc[t][v]);
  for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(sums.bias[v], bsum[v]);
}

/// relu's mask of `rows` rows of ow columns (at most 32) of y: bit j of mask[r] set where
/// y[r, j] is > 0 or NaN (not <= 0: where relu_backward passes the gradient).
TANDEM_AVX512 void reluMaskRows(int64_t rows, int64_t ow, const float* y, int32_t* mask) {
  const __mmask16 row[2] = {lanes(0, ow), lanes(0, ow - kRowLanes)};
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t bits = 0;
    for (int v = 0; v < 2; ++v) {
      const __m512 yv = _mm512_maskz_loadu_ps(row[v], moved(y, r * ow + v * kRowLanes));
      const __mmask16 passes =
          _mm512_mask_cmp_ps_mask(row[v], yv, _mm512_setzero_ps(), _CMP_NLE_UQ);
      bits |= static_cast<uint32_t>(passes) << (v * kRowLanes);
    }
    mask[r] = static_cast<int32_t>(bits);
  }
}

/// The filter gradient's running sums: per output channel and group of taps, a vector per
/// output vector of a row (TapSums), added image by image in the batch's order.
class FilterSums {
 public:
  TANDEM_AVX512 FilterSums(const ConvWindow& g, int64_t o, bool bias)
      : g_(g),
        o_(o),
        bias_(bias),
        taps_(tapsOf(g)),
        groups_((g.rows() + kTapsAtOnce - 1) / kTapsAtOnce),
        inside_(g.pad_h == 0 && g.pad_w == 0),
        vectors_(g.ow > kRowLanes ? 2 : 1),
        sums_(static_cast<size_t>(o * groups_), TapSums{}) {}

  /// Adds one image (x_image [c, h, w]) with its gradient planes dy_planes [last - first,
  /// oh, ow] of output channels [first, last).
  TANDEM_AVX512 void add(const float* x_image, const float* dy_planes, int64_t first,
                         int64_t last) {
    const int64_t plane = g_.oh * g_.ow;
    for (int64_t oc = first; oc < last; ++oc)
      for (int64_t group = 0; group < groups_; ++group) {
        const float* dy_plane = dy_planes + (oc - first) * plane;
        const Tap* group_taps = taps_.data() + group * kTapsAtOnce;
        TapSums& s = sums_[static_cast<size_t>(oc * groups_ + group)];
        const bool bias = bias_ && group == 0;
        if (inside_ && count(group) == kTapsAtOnce) {
          if (vectors_ == 2) {
            addImageInside<2>(g_, x_image, dy_plane, group_taps, bias, s);
          } else {
            addImageInside<1>(g_, x_image, dy_plane, group_taps, bias, s);
          }
        } else if (vectors_ == 2) {
          addImage<2>(g_, x_image, dy_plane, group_taps, count(group), bias, s);
        } else {
          addImage<1>(g_, x_image, dy_plane, group_taps, count(group), bias, s);
        }
      }
  }

  /// conv2d_relu_avg_pool's: adds one image with the gradient of its pooled output
  /// dp_planes [last - first, oh / 2, ow / 2] and relu's mask mask_planes [last - first,
  /// oh] of output channels [first, last). For a window without padding of at most
  /// kTapsAtOnce taps (tapConvReluPool's).
  TANDEM_AVX512 void addPooled(const float* x_image, const int32_t* mask_planes,
                               const float* dp_planes, int64_t first, int64_t last) {
    const int64_t pooled = (g_.oh / 2) * (g_.ow / 2);
    for (int64_t oc = first; oc < last; ++oc) {
      const float* dp_plane = dp_planes + (oc - first) * pooled;
      const int32_t* mask_plane = mask_planes + (oc - first) * g_.oh;
      TapSums& s = sums_[static_cast<size_t>(oc)];
      if (vectors_ == 2) {
        addPooledImage<2>(g_, x_image, mask_plane, dp_plane, taps_.data(), count(0), bias_, s);
      } else {
        addPooledImage<1>(g_, x_image, mask_plane, dp_plane, taps_.data(), count(0), bias_, s);
      }
    }
  }

  /// dw [o, c, kh, kw] and db [o] (when the sums have the bias) from the sums.
  TANDEM_AVX512 void write(float* dw, float* db) const {
    const int64_t taps_per_filter = g_.rows();
    for (int64_t oc = 0; oc < o_; ++oc) {
      for (int64_t group = 0; group < groups_; ++group) {
        const TapSums& s = sums_[static_cast<size_t>(oc * groups_ + group)];
        for (int t = 0; t < count(group); ++t)
          dw[oc * taps_per_filter + group * kTapsAtOnce + t] = total(s.taps[t], vectors_);
      }
      if (bias_) db[oc] = total(sums_[static_cast<size_t>(oc * groups_)].bias, vectors_);
    }
  }

  /// The output channels [first, last) of OpenMP thread `thread` of `threads`.
  std::pair<int64_t, int64_t> channelsOf(int64_t thread, int64_t threads) const {
    return {o_ * thread / threads, o_ * (thread + 1) / threads};
  }

 private:
  int count(int64_t group) const {
    return static_cast<int>(std::min<int64_t>(kTapsAtOnce, g_.rows() - group * kTapsAtOnce));
  }

  ConvWindow g_;
  int64_t o_;
  bool bias_;
  std::vector<Tap> taps_;
  int64_t groups_;
  bool inside_;  // every tap reads whole rows
  int vectors_;
  std::vector<TapSums> sums_;
};

/// Images outside, output channels inside: dy is read once, in the order it lies (a
/// channel's plane of every image in turn ran slower beside the other device's kernels,
/// each plane a new page for the prefetcher), and an image's x stays in L1 while its
/// channels pass. Each output channel's sums (a few KB) live in memory between images.
/// The OpenMP threads (threads_per_device) split the output channels.
TANDEM_AVX512 void tapFilterVectors(const ConvWindow& g, int64_t n, int64_t o, const float* x,
                                    const float* dy, float* dw, float* db) {
  FilterSums sums(g, o, db != nullptr);
  const int64_t plane = g.oh * g.ow, image = g.c * g.h * g.w;
#pragma omp parallel
  {
    const auto [first, last] = sums.channelsOf(omp_get_thread_num(), omp_get_num_threads());
    for (int64_t i = 0; i < n; ++i)
      sums.add(x + i * image, dy + (i * o + first) * plane, first, last);
  }
  sums.write(dw, db);
}

/// conv2d_relu_avg_pool: each image's convolution into a thread's scratch (tapForwardVectors'
/// loops), relu's mask of its rows and the 2x2 pool with relu from there (avgPool2x2Rows),
/// the OpenMP threads splitting the batch.
TANDEM_AVX512 void convReluPoolVectors(const ConvWindow& g, int64_t n, int64_t o, const float* x,
                                       const float* w, const float* b, float* y, int32_t* mask) {
  const std::vector<Tap> table = tapsOf(g);
  const int64_t image = g.c * g.h * g.w, plane = g.oh * g.ow, pooled = (g.oh / 2) * (g.ow / 2);
#pragma omp parallel
  {
    std::vector<float> conv(static_cast<size_t>(o * plane));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      forwardImageAllTaps(g, table, o, x + i * image, w, b, conv.data());
      reluMaskRows(o * g.oh, g.ow, conv.data(), mask + i * o * g.oh);
      avgPool2x2Rows(o, g.oh, g.ow, /*relu=*/true, conv.data(), y + i * o * pooled);
    }
  }
}

/// Its filter gradient: per image and output channel of the thread's, addPooled (the pooled
/// gradient's shares where the mask passes, the taps' products in FilterSums' order): the
/// bits of avg_pool2d_backward{relu} and conv2d_backward_filter by kTaps.
TANDEM_AVX512 void convReluPoolFilterVectors(const ConvWindow& g, int64_t n, int64_t o,
                                             const float* x, const int32_t* mask, const float* dy,
                                             float* dw, float* db) {
  FilterSums sums(g, o, db != nullptr);
  const int64_t image = g.c * g.h * g.w, pooled = (g.oh / 2) * (g.ow / 2);
#pragma omp parallel
  {
    const auto [first, last] = sums.channelsOf(omp_get_thread_num(), omp_get_num_threads());
    for (int64_t i = 0; i < n; ++i)
      sums.addPooled(x + i * image, mask + (i * o + first) * g.oh, dy + (i * o + first) * pooled,
                     first, last);
  }
  sums.write(dw, db);
}
#endif

class TapForwardKernel final : public CpuKernel {
 public:
  TapForwardKernel(const ConvWindow& g, int64_t n, int64_t o, bool bias)
      : g_(g), n_(n), o_(o), bias_(bias) {}

 private:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    tapConvForward(g_, n_, o_, in[0].f32(), in[1].f32(), bias_ ? in[2].f32() : nullptr,
                   out[0].f32());
  }
  ConvWindow g_;
  int64_t n_, o_;
  bool bias_;
};

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

void tapConvForward(const ConvWindow& g, int64_t n, int64_t o, const float* x, const float* w,
                    const float* b, float* y) {
#if TANDEM_AVX512_INTRINSICS
  tapForwardVectors(g, n, o, x, w, b, y);
#else
  (void)g, (void)n, (void)o, (void)x, (void)w, (void)b, (void)y;
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

void tapConvReluPool(const ConvWindow& g, int64_t n, int64_t o, const float* x, const float* w,
                     const float* b, float* y, int32_t* mask) {
#if TANDEM_AVX512_INTRINSICS
  convReluPoolVectors(g, n, o, x, w, b, y, mask);
#else
  (void)g, (void)n, (void)o, (void)x, (void)w, (void)b, (void)y, (void)mask;
#endif
}

void tapConvReluPoolFilterGradient(const ConvWindow& g, int64_t n, int64_t o, const float* x,
                                   const int32_t* mask, const float* dy, float* dw, float* db) {
#if TANDEM_AVX512_INTRINSICS
  convReluPoolFilterVectors(g, n, o, x, mask, dy, dw, db);
#else
  (void)g, (void)n, (void)o, (void)x, (void)mask, (void)dy, (void)dw, (void)db;
#endif
}

std::unique_ptr<CpuKernel> makeTapForwardKernel(const ConvWindow& g, int64_t n, int64_t o,
                                                bool bias) {
  return std::make_unique<TapForwardKernel>(g, n, o, bias);
}

std::unique_ptr<CpuKernel> makeTapFilterKernel(const ConvWindow& g, int64_t n, int64_t o,
                                               bool bias) {
  return std::make_unique<TapFilterKernel>(g, n, o, bias);
}

}  // namespace tandem::backend::cpu
