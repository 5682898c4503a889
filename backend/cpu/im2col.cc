#include "backend/cpu/im2col.h"

#include <algorithm>
#include <cstdint>

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

/// The output columns [first, last) whose input column o * stride - pad + k lies inside
/// [0, size): the rest read padding.
struct ColumnRange {
  int64_t first, last;
};
ColumnRange insideColumns(const ConvWindow& g, int64_t k) {
  const int64_t lead = g.pad_w - k;  // input column of output 0 is -lead
  int64_t first = lead > 0 ? (lead + g.stride_w - 1) / g.stride_w : 0;
  int64_t reach = g.w - 1 + lead;  // the last output reading column w - 1, times stride
  int64_t last = reach < 0 ? 0 : reach / g.stride_w + 1;
  first = std::min(first, g.ow);
  last = std::clamp(last, first, g.ow);
  return {first, last};
}

/// Calls line(c, r, oh, ih, shift, inside) for every tap r = (c, kh, kw) and output row oh:
/// ih is the input row it reads (outside [0, h): padding), output column j reads input
/// column j * stride_w + shift, and `inside` the columns for which that is no padding. The
/// one loop nest of both copies; a channel's plane stays in L1 while its taps run over it.
template <typename Line>
void forEachTapLine(const ConvWindow& g, Line line) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t kh = 0; kh < g.kh; ++kh)
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const int64_t r = (c * g.kh + kh) * g.kw + kw;
        const ColumnRange s = insideColumns(g, kw);
        for (int64_t oh = 0; oh < g.oh; ++oh)
          line(c, r, oh, oh * g.stride_h - g.pad_h + kh, kw - g.pad_w, s);
      }
}

#if TANDEM_AVX512_INTRINSICS
// AVX-512 versions for rows of at most 32 columns read at stride 1 (LeNet's, and
// ResNet-18's on 28x28 images). A line of LeNet's conv2 is 9 floats, and the loops above
// were a third of kGemm's time (cpu_kernels_bench under perf): more went to a line's
// set-up, remainder and loads than to its copy. Both give the loops' bits: a copy is a
// copy, and col2im adds every term in the loops' order.

using avx512::kRowColumns;
using avx512::kRowLanes;
using avx512::lanes;
using avx512::moved;

/// What a line of tap column kw does with its two vectors of at most 16 columns each:
/// computed once a window, as insideColumns divides by the stride.
struct LinePlan {
  __m512i from[2];     // im2col: the row's lane each output lane reads
  __mmask16 keep[2];   // im2col: the output lanes that read the row, not padding
  __mmask16 terms[2];  // col2im: the dx lanes that take a term of the line
  int64_t shift;       // dx column x takes output column x - shift
};
constexpr int64_t kMaxTapColumns = 8;  // LeNet's 5, ResNet's 3 and its stem's 7

TANDEM_AVX512 void planLines(const ConvWindow& g, LinePlan* plans) {
  const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t kw = 0; kw < g.kw; ++kw) {
    const ColumnRange s = insideColumns(g, kw);
    LinePlan& p = plans[kw];
    p.shift = kw - g.pad_w;
    for (int64_t v = 0; v < 2; ++v) {
      const int64_t j = v * kRowLanes;
      // Output column j + l reads input column j + l + shift: lane (that) of the row's
      // two vectors (indices wrap at 32 where masked off).
      p.from[v] = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int>(j + p.shift)));
      p.keep[v] = lanes(s.first - j, s.last - j);
      p.terms[v] = lanes(s.first + p.shift - j, s.last + p.shift - j) & lanes(0, g.w - j);
    }
  }
}

/// im2col an input row at a time: the row is loaded once into two vectors and every line
/// that reads it (each kw) is a permute of them and a masked store. A load per line
/// instead, between the stores, ran 2.7 times slower (LeNet's conv2: 18.9 against 6.9 us an
/// image), the loads waiting on the stores before them.
TANDEM_AVX512 void im2colRows(const ConvWindow& g, const float* x, float* cols,
                              int64_t row_stride) {
  LinePlan plans[kMaxTapColumns];
  planLines(g, plans);
  const __mmask16 store[2] = {lanes(0, g.ow), lanes(0, g.ow - kRowLanes)};
  const __mmask16 row[2] = {lanes(0, g.w), lanes(0, g.w - kRowLanes)};
  const int64_t vectors = g.ow > kRowLanes ? 2 : 1;
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t kh = 0; kh < g.kh; ++kh)
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t ih = oh * g.stride_h - g.pad_h + kh;
        __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();  // padding rows read zeros
        if (ih >= 0 && ih < g.h) {
          const float* in = x + (c * g.h + ih) * g.w;
          lo = _mm512_maskz_loadu_ps(row[0], in);
          hi = _mm512_maskz_loadu_ps(row[1], moved(in, kRowLanes));
        }
        float* out = cols + (c * g.kh + kh) * g.kw * row_stride + oh * g.ow;
        for (int64_t kw = 0; kw < g.kw; ++kw, out += row_stride)
          for (int64_t v = 0; v < vectors; ++v) {
            const LinePlan& p = plans[kw];
            _mm512_mask_storeu_ps(out + v * kRowLanes, store[v],
                                  _mm512_maskz_permutex2var_ps(p.keep[v], lo, p.from[v], hi));
          }
      }
}

/// col2im a block of dx rows at a time: each row's 16 columns are loaded once, every line
/// that adds onto them is added in registers in the loops' order (kh, then kw: each
/// element's terms arrive in the same sequence), and stored once. The block's rows are
/// independent chains, which hide the additions' latency: a row at a time ran no faster
/// than the loops.
TANDEM_AVX512 void col2imAddRows(const ConvWindow& g, const float* cols, int64_t row_stride,
                                 float* dx) {
  constexpr int64_t kBlock = 8;
  LinePlan plans[kMaxTapColumns];
  planLines(g, plans);
  const __mmask16 in_row[2] = {lanes(0, g.w), lanes(0, g.w - kRowLanes)};
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t ih0 = 0; ih0 < g.h; ih0 += kBlock)
      for (int64_t v = 0; v * kRowLanes < g.w; ++v) {
        const int64_t x0 = v * kRowLanes, rows = std::min(kBlock, g.h - ih0);
        float* dx0 = dx + (c * g.h + ih0) * g.w + x0;
        __m512 sum[kBlock];
        for (int64_t b = 0; b < kBlock; ++b)
          sum[b] = b < rows ? _mm512_maskz_loadu_ps(in_row[v], dx0 + b * g.w) : _mm512_setzero_ps();
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          // The output row that reads dx row ih0 + b through kh, -1 where none does.
          int64_t oh[kBlock];
          for (int64_t b = 0; b < kBlock; ++b) {
            const int64_t t = ih0 + b + g.pad_h - kh;  // oh * stride_h
            const bool reads = b < rows && t >= 0 && t % g.stride_h == 0 && t / g.stride_h < g.oh;
            oh[b] = reads ? t / g.stride_h : -1;
          }
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            const LinePlan& p = plans[kw];
            const float* tap = cols + ((c * g.kh + kh) * g.kw + kw) * row_stride;
            for (int64_t b = 0; b < kBlock; ++b) {
              if (oh[b] < 0) continue;
              const __m512 term =
                  _mm512_maskz_loadu_ps(p.terms[v], moved(tap, oh[b] * g.ow + x0 - p.shift));
              sum[b] = _mm512_mask_add_ps(sum[b], p.terms[v], sum[b], term);
            }
          }
        }
        for (int64_t b = 0; b < rows; ++b) _mm512_mask_storeu_ps(dx0 + b * g.w, in_row[v], sum[b]);
      }
}

/// Whether the AVX-512 rows take this window here: AVX-512 on the host, stride 1 along
/// the row (a strided row would be a gather), input and output rows of at most 32 columns
/// and at most 8 taps along them.
bool vectorRows(const ConvWindow& g) {
  return avx512Runs() && g.stride_w == 1 && g.w <= kRowColumns && g.ow <= kRowColumns &&
         g.kw <= kMaxTapColumns;
}
#endif

}  // namespace

TANDEM_VECTOR_LOOPS void im2colLoops(const ConvWindow& g, const float* x, float* cols,
                                     int64_t row_stride) {
  forEachTapLine(g,
                 [&](int64_t c, int64_t r, int64_t oh, int64_t ih, int64_t shift, ColumnRange s) {
                   float* out = cols + r * row_stride + oh * g.ow;
                   if (ih < 0 || ih >= g.h) {
                     std::fill(out, out + g.ow, 0.0f);
                     return;
                   }
                   const float* in = x + (c * g.h + ih) * g.w;
                   // Loops, not memcpy and fill: rows are short (LeNet's conv2: 9 floats), and a
                   // call per row cost more than the copy.
                   for (int64_t j = 0; j < s.first; ++j) out[j] = 0.0f;
                   if (g.stride_w == 1) {
                     for (int64_t j = s.first; j < s.last; ++j) out[j] = in[j + shift];
                   } else {
                     for (int64_t j = s.first; j < s.last; ++j) out[j] = in[j * g.stride_w + shift];
                   }
                   for (int64_t j = s.last; j < g.ow; ++j) out[j] = 0.0f;
                 });
}

TANDEM_VECTOR_LOOPS void col2imAddLoops(const ConvWindow& g, const float* cols, int64_t row_stride,
                                        float* dx) {
  forEachTapLine(g,
                 [&](int64_t c, int64_t r, int64_t oh, int64_t ih, int64_t shift, ColumnRange s) {
                   if (ih < 0 || ih >= g.h) return;
                   const float* in = cols + r * row_stride + oh * g.ow;
                   float* out = dx + (c * g.h + ih) * g.w;
                   if (g.stride_w == 1) {
                     for (int64_t j = s.first; j < s.last; ++j) out[j + shift] += in[j];
                   } else {
                     for (int64_t j = s.first; j < s.last; ++j)
                       out[j * g.stride_w + shift] += in[j];
                   }
                 });
}

void im2col(const ConvWindow& g, const float* x, float* cols, int64_t row_stride) {
#if TANDEM_AVX512_INTRINSICS
  if (vectorRows(g)) return im2colRows(g, x, cols, row_stride);
#endif
  im2colLoops(g, x, cols, row_stride);
}

void col2imAdd(const ConvWindow& g, const float* cols, int64_t row_stride, float* dx) {
#if TANDEM_AVX512_INTRINSICS
  if (vectorRows(g)) return col2imAddRows(g, cols, row_stride, dx);
#endif
  col2imAddLoops(g, cols, row_stride, dx);
}

}  // namespace tandem::backend::cpu
