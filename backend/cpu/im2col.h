#pragma once

// Image-to-column copies for convolutions run as matrix products (gemm_conv.h): one image's
// receptive fields as a [C*KH*KW, OH*OW] matrix (row (c, kh, kw) holds, for every output
// pixel, the input element that tap reads, 0 over padding), and its adjoint, which adds
// such a matrix back onto the image's pixels. The caller chooses the distance between
// rows, so that several images' matrices can sit side by side ([rows][images][pixels]) and
// form one wider product.

#include <cstdint>

namespace tandem::backend::cpu {

/// One image's convolution window: input [c, h, w], filter taps [kh, kw], output [oh, ow].
struct ConvWindow {
  int64_t c, h, w;
  int64_t kh, kw;
  int64_t oh, ow;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;  // leading (top, left) padding; the output extent fixes the rest

  int64_t rows() const { return c * kh * kw; }
  int64_t pixels() const { return oh * ow; }
};

/// cols[r * row_stride + p] = the input element tap r reads for output pixel p (0 where it
/// falls on padding), for the image `x` ([c, h, w], dense). row_stride >= pixels().
void im2col(const ConvWindow& g, const float* x, float* cols, int64_t row_stride);

/// The adjoint of im2col: dx[pixel] += every cols element im2col would have copied from
/// it. Elements over padding are dropped. dx ([c, h, w], dense) is added to, not set.
void col2imAdd(const ConvWindow& g, const float* cols, int64_t row_stride, float* dx);

/// The two by portable loops alone, the same bits: what im2col and col2imAdd run where
/// the host has no AVX-512 or the window a stride along its rows (their vector lines are
/// tested against these).
void im2colLoops(const ConvWindow& g, const float* x, float* cols, int64_t row_stride);
void col2imAddLoops(const ConvWindow& g, const float* cols, int64_t row_stride, float* dx);

}  // namespace tandem::backend::cpu
