#pragma once

// Per-element math of the pooling kernels (pool.cu), compiled for the device and for the
// host tests, which compare it with backend/cpu/pool_kernels.cc bit for bit. It follows
// the CPU's conventions exactly, its two code paths included:
//  - max pooling ignores padding and gives NaN for a window holding one; its backward
//    sends each window's dy to the window's first maximum in row-major order (a NaN
//    counts as the largest, and a later NaN takes over from an earlier one);
//  - average pooling counts padding as zeros (divides by the kernel's h*w, or by the part of a
//    ceil_mode window inside the padded image);
//  - the 2x2 stride-2 unpadded window has its own expression order on the CPU (pairs
//    first), and its backward assigns instead of accumulating: so here too;
//  - average pooling with relu (fuse-relu-pool) pools relu(x) and masks its backward where
//    x <= 0, with relu's own per-element math (backend/unary_math.h).
// Forward kernels compute one output element per thread; backward kernels one input
// element per thread, gathering the windows that cover it in the order the CPU's loop
// adds them (row-major over windows), so sums round alike. Values are computed in float;
// a bf16 result is rounded once, where it is stored.

#include <cstdint>

#include "backend/cuda/host_device.h"
#include "backend/unary_math.h"

namespace tandem::backend::cuda {

/// One pooling over `planes` planes of h x w (N * C of them), giving oh x ow each. `step`:
/// elements between neighbouring pixels of a plane, 1 in NCHW, C in NHWC (layout_plan.h:
/// input and output share the layout); plane `p` is image p / step, channel p % step.
struct PoolParams {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, stride_h, stride_w, pad_h, pad_w;  // the window per axis
  int64_t step = 1;
  bool relu = false;  // average pooling of relu(x), and its masked backward
};

/// Where plane `plane` starts in a tensor of `pixels` pixels per plane.
TANDEM_HD int64_t poolPlaneBase(const PoolParams& p, int64_t plane, int64_t pixels) {
  return plane / p.step * pixels * p.step + plane % p.step;
}

/// The plane and the pixel (in the plane, row-major) of element e of a tensor of `pixels`
/// pixels per plane, e counted in memory order.
struct PlanePixel {
  int64_t plane, pixel;
};
TANDEM_HD PlanePixel poolElement(const PoolParams& p, int64_t e, int64_t pixels) {
  const int64_t rest = e / p.step;
  return {rest / pixels * p.step + e % p.step, rest % pixels};
}

TANDEM_HD int64_t poolMax64(int64_t a, int64_t b) { return a > b ? a : b; }
TANDEM_HD int64_t poolMin64(int64_t a, int64_t b) { return a < b ? a : b; }

/// LeNet's window: every output reads one aligned 2x2 block (none partial: no ceil_mode
/// window past an odd extent).
TANDEM_HD bool poolIs2x2(const PoolParams& p) {
  return p.kh == 2 && p.kw == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
         p.pad_w == 0 && p.oh == p.h / 2 && p.ow == p.w / 2;
}

/// The input rows (or columns) [begin, end) that window i covers inside the image.
TANDEM_HD int64_t windowBegin(int64_t i, int64_t stride, int64_t pad) {
  return poolMax64(i * stride - pad, 0);
}
TANDEM_HD int64_t windowEnd(int64_t i, int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return poolMin64(i * stride - pad + k, in);
}

/// The extent of window i that average pooling counts: the part inside the padded image
/// (the kernel, but for a partial last window that ceil_mode adds), as the CPU's Ranges.
TANDEM_HD int64_t windowDivisor(int64_t i, int64_t in, int64_t k, int64_t stride, int64_t pad) {
  const int64_t b = i * stride - pad;
  return poolMin64(b + k, in + pad) - b;
}
/// 1 / (the divisors' product) of window (i, j): 1 / (kernel h*w) but at the partial windows.
TANDEM_HD float avgPoolScale(const PoolParams& p, int64_t i, int64_t j) {
  return 1.0f / static_cast<float>(windowDivisor(i, p.h, p.kh, p.stride_h, p.pad_h) *
                                   windowDivisor(j, p.w, p.kw, p.stride_w, p.pad_w));
}

/// The windows [first, last] (inclusive; empty when last < first) whose extent holds
/// input row (or column) r.
TANDEM_HD int64_t firstWindow(int64_t r, int64_t k, int64_t stride, int64_t pad) {
  const int64_t lo = r + pad - k + 1;  // window i covers r when i * stride > r + pad - k
  return lo <= 0 ? 0 : (lo + stride - 1) / stride;
}
TANDEM_HD int64_t lastWindow(int64_t r, int64_t out, int64_t stride, int64_t pad) {
  return poolMin64((r + pad) / stride, out - 1);
}

TANDEM_HD bool isNan(float v) { return v != v; }
TANDEM_HD float quietNan() { return bitsFloat(0x7fc00000u); }
/// std::max(a, b): b only when a < b, so ties (and a NaN b) keep a.
TANDEM_HD float stdMax(float a, float b) { return a < b ? b : a; }
/// -inf, the start of the CPU's running maximum.
TANDEM_HD float negInf() { return bitsFloat(0xff800000u); }

// The functions below take `x` / `dy` at the start of one plane (poolPlaneBase) and
// index its pixels times p.step.

/// max_pool2d's output (i, j) of plane `x` (h x w).
template <typename T>
TANDEM_HD float maxPoolAt(const T* x, const PoolParams& p, int64_t i, int64_t j) {
  if (poolIs2x2(p)) {
    const int64_t r0 = 2 * i * p.w, r1 = r0 + p.w, s = p.step;
    const float a = load(x, (r0 + 2 * j) * s), b = load(x, (r0 + 2 * j + 1) * s);
    const float c = load(x, (r1 + 2 * j) * s), d = load(x, (r1 + 2 * j + 1) * s);
    const float m = stdMax(stdMax(a, b), stdMax(c, d));
    // Not isNan(a + b + c + d): +inf beside -inf sums to NaN, where the maximum is +inf.
    return isNan(a) || isNan(b) || isNan(c) || isNan(d) ? quietNan() : m;
  }
  float m = negInf();
  bool has_nan = false;
  const int64_t re = windowEnd(i, p.h, p.kh, p.stride_h, p.pad_h);
  const int64_t ce = windowEnd(j, p.w, p.kw, p.stride_w, p.pad_w);
  for (int64_t r = windowBegin(i, p.stride_h, p.pad_h); r < re; ++r)
    for (int64_t c = windowBegin(j, p.stride_w, p.pad_w); c < ce; ++c) {
      const float v = load(x, (r * p.w + c) * p.step);
      has_nan |= isNan(v);
      m = stdMax(m, v);
    }
  return has_nan ? quietNan() : m;
}

/// avg_pool2d's output (i, j) of plane `x`.
/// Input `at` of plane `x` as average pooling adds it: relu(x) with p.relu.
template <typename T>
TANDEM_HD float avgPoolInput(const T* x, const PoolParams& p, int64_t at) {
  const float v = load(x, at);
  return p.relu ? reluValue(v) : v;
}

template <typename T>
TANDEM_HD float avgPoolAt(const T* x, const PoolParams& p, int64_t i, int64_t j) {
  if (poolIs2x2(p)) {
    const int64_t r0 = 2 * i * p.w, r1 = r0 + p.w, s = p.step;
    return ((avgPoolInput(x, p, (r0 + 2 * j) * s) + avgPoolInput(x, p, (r0 + 2 * j + 1) * s)) +
            (avgPoolInput(x, p, (r1 + 2 * j) * s) + avgPoolInput(x, p, (r1 + 2 * j + 1) * s))) *
           0.25f;
  }
  float sum = 0;
  const int64_t re = windowEnd(i, p.h, p.kh, p.stride_h, p.pad_h);
  const int64_t ce = windowEnd(j, p.w, p.kw, p.stride_w, p.pad_w);
  for (int64_t r = windowBegin(i, p.stride_h, p.pad_h); r < re; ++r)
    for (int64_t c = windowBegin(j, p.stride_w, p.pad_w); c < ce; ++c)
      sum += avgPoolInput(x, p, (r * p.w + c) * p.step);
  return sum * avgPoolScale(p, i, j);
}

/// Index in the plane of window (i, j)'s first maximum, a NaN counting as the largest:
/// the CPU's argMaxWithNan, which agrees with its branch-free search wherever that runs.
template <typename T>
TANDEM_HD int64_t windowArgMax(const T* x, const PoolParams& p, int64_t i, int64_t j) {
  const int64_t rb = windowBegin(i, p.stride_h, p.pad_h), cb = windowBegin(j, p.stride_w, p.pad_w);
  const int64_t re = windowEnd(i, p.h, p.kh, p.stride_h, p.pad_h);
  const int64_t ce = windowEnd(j, p.w, p.kw, p.stride_w, p.pad_w);
  int64_t best = rb * p.w + cb;
  float best_v = load(x, best * p.step);
  for (int64_t r = rb; r < re; ++r)
    for (int64_t c = cb; c < ce; ++c) {
      const float v = load(x, (r * p.w + c) * p.step);
      if (v > best_v || isNan(v)) {
        best = r * p.w + c;
        best_v = v;
      }
    }
  return best;
}

/// max_pool2d_backward's dx at input (r, c) of one plane: dy of every window whose first
/// maximum is (r, c), added in window order.
template <typename T>
TANDEM_HD float maxPoolBackwardAt(const T* dy, const T* x, const PoolParams& p, int64_t r,
                                  int64_t c) {
  const int64_t here = r * p.w + c;
  if (poolIs2x2(p)) {
    const int64_t i = r / 2, j = c / 2;  // the one window over (r, c), if any
    if (i >= p.oh || j >= p.ow) return 0.0f;
    return windowArgMax(x, p, i, j) == here ? load(dy, (i * p.ow + j) * p.step) : 0.0f;
  }
  float acc = 0.0f;
  const int64_t il = lastWindow(r, p.oh, p.stride_h, p.pad_h);
  const int64_t jl = lastWindow(c, p.ow, p.stride_w, p.pad_w);
  for (int64_t i = firstWindow(r, p.kh, p.stride_h, p.pad_h); i <= il; ++i)
    for (int64_t j = firstWindow(c, p.kw, p.stride_w, p.pad_w); j <= jl; ++j)
      if (windowArgMax(x, p, i, j) == here) acc += load(dy, (i * p.ow + j) * p.step);
  return acc;
}

/// The sum of the windows' shares at input (r, c): dy / (its divisor) of every window
/// over (r, c), added in window order.
template <typename T>
TANDEM_HD float avgPoolShares(const T* dy, const PoolParams& p, int64_t r, int64_t c) {
  if (poolIs2x2(p)) {
    const int64_t i = r / 2, j = c / 2;
    if (i >= p.oh || j >= p.ow) return 0.0f;
    return load(dy, (i * p.ow + j) * p.step) * 0.25f;
  }
  float acc = 0.0f;
  const int64_t il = lastWindow(r, p.oh, p.stride_h, p.pad_h);
  const int64_t jl = lastWindow(c, p.ow, p.stride_w, p.pad_w);
  for (int64_t i = firstWindow(r, p.kh, p.stride_h, p.pad_h); i <= il; ++i)
    for (int64_t j = firstWindow(c, p.kw, p.stride_w, p.pad_w); j <= jl; ++j)
      acc += load(dy, (i * p.ow + j) * p.step) * avgPoolScale(p, i, j);
  return acc;
}

/// avg_pool2d_backward's dx at input (r, c) of one plane (`x` that plane, read only with
/// p.relu: relu_backward's mask).
template <typename T>
TANDEM_HD float avgPoolBackwardAt(const T* dy, const T* x, const PoolParams& p, int64_t r,
                                  int64_t c) {
  const float g = avgPoolShares(dy, p, r, c);
  return p.relu ? reluBackwardValue(g, load(x, (r * p.w + c) * p.step)) : g;
}

}  // namespace tandem::backend::cuda
