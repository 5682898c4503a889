#pragma once

// The per-element math of scale, add_bcast, mul_bcast, concat_axis, slice_axis and
// slice_axis_backward, compiled for the GPU (broadcast.cu) and by the host tests, which
// check it against the CPU kernels (the own scale and copy loops, oneDNN's binary): each
// computes element i of the result, in float, reading f32 or bf16 operands through load()
// and rounding a bf16 result once in store() (host_device.h). The index math is
// backend/broadcast_index.h's, which the CPU loops run too.

#include <cstdint>

#include "backend/broadcast_index.h"
#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// scale: y[i] = factor * x[i], as the CPU's loop and PyTorch's x * c compute it (a -0
/// product stays -0).
template <typename X, typename Y>
TANDEM_HD void scaleAt(const X* x, Y* y, float factor, int64_t i) {
  store(y, i, factor * load(x, i));
}

/// add_bcast (mul = false) or mul_bcast (mul = true): y[i] = a[ma(i)] op b[mb(i)].
template <typename A, typename B, typename Y>
TANDEM_HD void broadcastBinaryAt(const A* a, const B* b, Y* y, const BroadcastMap& ma,
                                 const BroadcastMap& mb, bool mul, int64_t i) {
  const float va = load(a, ma.source(i)), vb = load(b, mb.source(i));
  store(y, i, mul ? va * vb : va + vb);
}

/// One concat_axis operand's element t of its block [outer, len, inner] of the result
/// [outer, total, inner] at `start`, read through `map` (broadcast to the block's shape).
template <typename X, typename Y>
TANDEM_HD void concatPartAt(const X* x, Y* y, const BroadcastMap& map, int64_t len, int64_t inner,
                            int64_t total, int64_t start, int64_t t) {
  store(y, blockToWhole(t, len, inner, total, start), load(x, map.source(t)));
}

/// slice_axis: y[t] = x at element t of the block [outer, len, inner] from `start` of
/// x's [outer, size, inner]. A copy of T's bits (any 2- or 4-byte element).
template <typename T>
TANDEM_HD void sliceAt(const T* x, T* y, int64_t len, int64_t inner, int64_t size, int64_t start,
                       int64_t t) {
  y[t] = x[blockToWhole(t, len, inner, size, start)];
}

/// slice_axis_backward: dx[t] = dy's element there inside the block, zero bits outside.
template <typename T>
TANDEM_HD void sliceBackwardAt(const T* dy, T* dx, int64_t len, int64_t inner, int64_t size,
                               int64_t start, int64_t t) {
  const int64_t j = wholeToBlock(t, len, inner, size, start);
  dx[t] = j < 0 ? T{0} : dy[j];
}

}  // namespace tandem::backend::cuda
