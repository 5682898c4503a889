#pragma once

// The index math of pad and pad_backward (ir/ops.td), compiled for the CPU kernels, the
// CUDA kernels (pad.cu) and the host tests alike. Along an axis of extent n with b
// padded before it, output coordinate o reads input coordinate o - b inside, and in the
// padding: nothing (constant: the value), the mirror image without the edge (reflect,
// PyTorch's and numpy's "reflect"), or the edge (edge, PyTorch's "replicate"). The
// backward op gathers for each input element the outputs that read it, at most three
// runs per axis, in increasing output order: every device adds the same terms in the
// same order, and no atomics are needed.

#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

enum class PadModeCode : int32_t { kConstant = 0, kReflect = 1, kEdge = 2 };

/// The most axes a padded tensor has (the shape rule's limit).
inline constexpr int kMaxPadRank = 8;

/// One pad: per axis the input extent, the padding before it and the output extent.
struct PadGeometry {
  int32_t rank = 0;
  PadModeCode mode = PadModeCode::kConstant;
  int64_t in[kMaxPadRank] = {}, begin[kMaxPadRank] = {}, out[kMaxPadRank] = {};
};

/// The input coordinate that output coordinate o reads along an axis of extent n with b
/// before it; -1 where it reads the constant.
TANDEM_HD int64_t padSource(int64_t o, int64_t n, int64_t b, PadModeCode mode) {
  const int64_t i = o - b;
  if (i >= 0 && i < n) return i;
  if (mode == PadModeCode::kEdge) return i < 0 ? 0 : n - 1;
  if (mode == PadModeCode::kReflect) return i < 0 ? -i : 2 * (n - 1) - i;  // pads < n
  return -1;
}

/// The flat input index output element `o` (row-major) reads, or -1 for the constant.
TANDEM_HD int64_t padSourceIndex(const PadGeometry& g, int64_t o) {
  int64_t coord[kMaxPadRank];
  for (int a = g.rank - 1; a >= 0; --a) {
    coord[a] = o % g.out[a];
    o /= g.out[a];
  }
  int64_t flat = 0;
  for (int a = 0; a < g.rank; ++a) {
    const int64_t i = padSource(coord[a], g.in[a], g.begin[a], g.mode);
    if (i < 0) return -1;
    flat = flat * g.in[a] + i;
  }
  return flat;
}

/// The output coordinates that read input coordinate i along one axis: up to three runs
/// of consecutive coordinates, in increasing order.
struct PadReaders {
  int64_t first[3], count[3];
  int32_t runs;
};

TANDEM_HD PadReaders padReaders(int64_t i, int64_t n, int64_t b, int64_t m, PadModeCode mode) {
  PadReaders r{{0, 0, 0}, {0, 0, 0}, 0};
  const int64_t e = m - n - b;  // padded after
  auto add = [&r](int64_t first, int64_t count) {
    r.first[r.runs] = first;
    r.count[r.runs] = count;
    ++r.runs;
  };
  if (mode == PadModeCode::kEdge) {
    // The first element is read by the padding before it too, the last by that after.
    const int64_t lo = i == 0 ? 0 : i + b;
    const int64_t hi = i == n - 1 ? m - 1 : i + b;
    add(lo, hi - lo + 1);
  } else if (mode == PadModeCode::kReflect) {
    if (i >= 1 && i <= b) add(b - i, 1);  // its mirror image before
    add(i + b, 1);
    if (i >= n - 1 - e && i <= n - 2) add(b + 2 * (n - 1) - i, 1);  // and after
  } else {
    add(i + b, 1);
  }
  return r;
}

/// Calls f(o) for every flat output index o that reads flat input element `x`, in
/// increasing order.
template <typename F>
TANDEM_HD void forEachPadReader(const PadGeometry& g, int64_t x, F f) {
  PadReaders readers[kMaxPadRank];
  for (int a = g.rank - 1; a >= 0; --a) {
    readers[a] = padReaders(x % g.in[a], g.in[a], g.begin[a], g.out[a], g.mode);
    x /= g.in[a];
  }
  // An odometer over (run, offset in the run) per axis, the last axis fastest.
  int32_t run[kMaxPadRank] = {};
  int64_t step[kMaxPadRank] = {};
  for (;;) {
    int64_t o = 0;
    for (int a = 0; a < g.rank; ++a) o = o * g.out[a] + readers[a].first[run[a]] + step[a];
    f(o);
    int a = g.rank - 1;
    for (; a >= 0; --a) {
      if (++step[a] < readers[a].count[run[a]]) break;
      step[a] = 0;
      if (++run[a] < readers[a].runs) break;
      run[a] = 0;
    }
    if (a < 0) return;
  }
}

}  // namespace tandem::backend
