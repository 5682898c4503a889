#pragma once

// Per-element math of the convolution family's own kernels (conv.cu): the epilogue that
// follows cuDNN's convolution (bias, residual, relu) and the bias gradient. Compiled for
// the device and for the host tests, which compare it with the CPU backend.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// v rounded to the element type T (float: as is; bf16: to nearest even), as a float.
TANDEM_HD float roundAs(const float*, float v) { return v; }
TANDEM_HD float roundAs(const uint16_t*, float v) { return bf16ToFloat(floatToBf16(v)); }

/// Element i of y = conv + bias (rounded to T, as the CPU's convolution stores it), then
/// + residual, then relu (std::max(v, 0): NaN and -0 pass), rounded once more at the
/// store: conv2d's bias and conv2d_bias_act's whole epilogue, in the CPU's order.
/// `y` holds the convolution without bias; `residual` may be null. B: the bias's type
/// (f32 master weights or the activations' type).
template <typename T, typename B>
TANDEM_HD float convEpilogueAt(const T* y, const B* bias, const T* residual, bool relu, int64_t i,
                               int64_t channels, int64_t hw) {
  const int64_t c = (i / hw) % channels;
  float v = roundAs(y, load(y, i) + load(bias, c));
  if (residual != nullptr) v = v + load(residual, i);
  if (relu) v = v < 0.0f ? 0.0f : v;
  return v;
}

/// Threads per block of the bias gradient, one block per channel.
constexpr int kBiasGradThreads = 256;

/// Thread t's share of channel c's bias gradient: dy over the batch and the plane, the
/// elements t, t + kBiasGradThreads, ... of the channel's n * hw, added in that order.
template <typename T>
TANDEM_HD float biasGradPartial(const T* dy, int64_t n, int64_t channels, int64_t hw, int64_t c,
                                int t) {
  float acc = 0.0f;
  for (int64_t e = t; e < n * hw; e += kBiasGradThreads)
    acc += load(dy, ((e / hw) * channels + c) * hw + e % hw);
  return acc;
}
// The block then adds its partials in a tree: p[t] += p[t + s] for t < s, s = 128, 64,
// ..., 1; p[0] is the channel's gradient (the host tests repeat the same tree).
// An NHWC tensor (layout_plan.h) goes to convEpilogueAt and biasGradPartial as
// [N*H*W, C, 1]: the channel of element i is i % C, and a channel's values come in the
// same order e = image * H*W + pixel, so both layouts add the same numbers in the same order.

/// Where element i of an [n, c, hw] (NCHW) tensor sits in the same tensor stored
/// [n, hw, c] (NHWC). A filter [k, c, r, s] is the case n = k, hw = r * s: KCRS -> KRSC,
/// the filter layout cuDNN's channels-last kernels read beside NHWC data.
TANDEM_HD int64_t nhwcIndexOf(int64_t i, int64_t c, int64_t hw) {
  const int64_t pixel = i % hw, rest = i / hw;  // rest = image * c + channel
  return (rest / c * hw + pixel) * c + rest % c;
}

}  // namespace tandem::backend::cuda
