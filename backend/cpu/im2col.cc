#include "backend/cpu/im2col.h"

#include <algorithm>

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

}  // namespace

TANDEM_VECTOR_LOOPS void im2col(const ConvWindow& g, const float* x, float* cols,
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

TANDEM_VECTOR_LOOPS void col2imAdd(const ConvWindow& g, const float* cols, int64_t row_stride,
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

}  // namespace tandem::backend::cpu
