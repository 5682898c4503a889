#pragma once

// Convolutions of few input channels tap by tap, in AVX-512 registers along the rows
// (ConvStrategy::kTaps, conv_choice.h says where). The forward sums each output row over
// the filter's taps, x's rows shifted by each tap loaded once and shared by every output
// channel; the backward filter sums each tap's gradient, a dot product of dy's rows with
// x's rows shifted by the tap, over the batch.
// LeNet's conv1 (1 -> 20 channels, 3x3 over 28x28) has 9 taps a filter: as a product
// (kGemm) its 9 columns fill a sliver of the vector, and oneDNN's blocked kernel first
// reorders the whole dy into nChw16c (a training step's 6.9 MB a device, more time than
// its convolution). Here dy is read once, where it lies, and x from the caches: 0.78 ms
// against the blocked kernel's 1.36 and kGemm's 1.44 (one thread, cpu_kernels_bench).

#include <cstdint>
#include <memory>

#include "backend/cpu/im2col.h"
#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

// Call these where avx512Runs() (avx512_rows.h), on windows conv_choice.h's tapsApply
// takes.

/// dw[o, c, kh, kw] = the sum over the `n` images and the output pixels of
/// dy[n, o, oh, ow] * x[n, c, oh * stride_h - pad_h + kh, ow - pad_w + kw] (0 over
/// padding), and db[o] (when not null) the sum of dy[n, o]. x [n, c, h, w] and dy
/// [n, o, oh, ow] dense; dw and db are written, not added to.
void tapFilterGradient(const ConvWindow& g, int64_t n, int64_t o, const float* x, const float* dy,
                       float* dw, float* db);

/// y[n, o, oh, ow] = the sum over the taps (c, kh, kw) of w[o, c, kh, kw] *
/// x[n, c, oh * stride_h + kh, ow + kw], then + b[o] (when not null): a window without
/// padding (conv_choice.h's tapsApply). x [n, c, h, w], w [o, c, kh, kw] and y
/// [n, o, oh, ow] dense; y is written.
void tapConvForward(const ConvWindow& g, int64_t n, int64_t o, const float* x, const float* w,
                    const float* b, float* y);

/// The most taps (c * kh * kw) the two below take: one group of the loops' registers
/// (fuse-conv-relu-pool fuses no more).
inline constexpr int64_t kConvReluPoolTaps = 9;

/// conv2d_relu_avg_pool (fuse-conv-relu-pool): relu(conv(x, w) + b) pooled over 2x2 windows
/// of stride 2 (floor) into y [n, o, oh / 2, ow / 2], and relu's mask [n, o, oh] (bit j of
/// a row's i32 set where the convolution's output is > 0 or NaN), image by image: each
/// image's convolution by tapConvForward's loops into a scratch that stays in the caches,
/// then the mask and avgPool2x2Rows from there. The bits of tapConvForward followed by
/// avgPool2x2Rows{relu}. A window without padding of at most kConvReluPoolTaps taps, rows
/// of at most 32 columns.
void tapConvReluPool(const ConvWindow& g, int64_t n, int64_t o, const float* x, const float* w,
                     const float* b, float* y, int32_t* mask);

/// Its filter gradient from dy [n, o, oh / 2, ow / 2], the pooled output's, and the mask:
/// per image, output channel and row, dy's shares (avgPool2x2BackwardRows{relu}'s lanes,
/// where the mask passes) and the taps' products with them (tapFilterGradient's), in
/// registers. The bits of avgPool2x2BackwardRows{relu} and tapFilterGradient in a row; dw
/// and db (when not null) are written. The same windows as tapConvReluPool.
void tapConvReluPoolFilterGradient(const ConvWindow& g, int64_t n, int64_t o, const float* x,
                                   const int32_t* mask, const float* dy, float* dw, float* db);

/// conv2d (x, w, b? -> y) of n images and o output channels by tapConvForward; `bias`
/// whether the node has b.
std::unique_ptr<CpuKernel> makeTapForwardKernel(const ConvWindow& g, int64_t n, int64_t o,
                                                bool bias);

/// conv2d_backward_filter (dy, x, w -> dw, db?) of n images and o output channels by
/// tapFilterGradient; `bias` whether it writes db. Exact over NaN and infinities: padding
/// is never multiplied (its lanes keep their sums), as in a direct convolution.
std::unique_ptr<CpuKernel> makeTapFilterKernel(const ConvWindow& g, int64_t n, int64_t o,
                                               bool bias);

}  // namespace tandem::backend::cpu
