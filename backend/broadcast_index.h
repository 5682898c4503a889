#pragma once

// Index math of the broadcasting and axis-copying ops (add_bcast, mul_bcast, concat_axis,
// slice_axis and its backward), shared by the CPU kernels' own loops and the CUDA kernels
// (broadcast.cu): plain C++17 with TANDEM_HD, so the host tests check the very arithmetic
// the GPU runs against the CPU backend. The host-only part makes the maps from IR shapes.

#include <cstdint>

#include "backend/host_device.h"

#if !defined(__CUDACC__)
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "ir/types.h"
#endif

namespace tandem::backend {

/// The most axes a broadcast map takes (the ViT's tensors have at most 4).
inline constexpr int kMaxBroadcastRank = 8;

/// Where element i (row-major) of a tensor of shape `dims` reads an operand that numpy's
/// broadcasting stretches to that shape: `strides` are the operand's row-major strides
/// aligned to the last axis, 0 on the axes it repeats along (size 1 or missing).
struct BroadcastMap {
  int rank = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t strides[kMaxBroadcastRank] = {};

  TANDEM_HD int64_t source(int64_t i) const {
    int64_t offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (i % dims[d]) * strides[d];
      i /= dims[d];
    }
    return offset;
  }
  /// Whether the operand is the whole tensor (no axis repeats): source(i) == i.
  TANDEM_HD bool identity() const {
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (dims[d] != 1 && strides[d] != stride) return false;
      stride *= dims[d];
    }
    return true;
  }
};

/// Element t of the block [outer, len, inner] that a slice (or one concat operand) covers,
/// as an index into the tensor [outer, size, inner] whose axis holds it from `start`.
TANDEM_HD int64_t blockToWhole(int64_t t, int64_t len, int64_t inner, int64_t size, int64_t start) {
  const int64_t o = t / (len * inner), r = t % (len * inner);
  return o * size * inner + start * inner + r;
}

/// The inverse for slice_axis_backward: element t of the whole [outer, size, inner] as an
/// index into the block [outer, len, inner] from `start`, or -1 outside it (a zero).
TANDEM_HD int64_t wholeToBlock(int64_t t, int64_t len, int64_t inner, int64_t size, int64_t start) {
  const int64_t o = t / (size * inner), a = (t / inner) % size, i = t % inner;
  if (a < start || a >= start + len) return -1;
  return (o * len + (a - start)) * inner + i;
}

#if !defined(__CUDACC__)

/// The map of an operand of shape `operand` broadcast to `result` (numpy's rules, which
/// the shape rules checked); an error naming `where` beyond kMaxBroadcastRank axes.
inline absl::StatusOr<BroadcastMap> broadcastMap(const ir::Shape& operand, const ir::Shape& result,
                                                 absl::string_view where) {
  if (result.size() > static_cast<size_t>(kMaxBroadcastRank) || operand.size() > result.size())
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": broadcasting [", absl::StrJoin(operand, ","), "] to [",
                     absl::StrJoin(result, ","), "] takes at most ", kMaxBroadcastRank, " axes"));
  BroadcastMap m;
  m.rank = static_cast<int>(result.size());
  const size_t lead = result.size() - operand.size();
  int64_t stride = 1;
  for (size_t d = result.size(); d-- > 0;) {
    m.dims[d] = result[d];
    const int64_t size = d < lead ? 1 : operand[d - lead];
    m.strides[d] = size == 1 && result[d] != 1 ? 0 : stride;
    stride *= size;
  }
  return m;
}

/// One concat_axis operand's place in the result [outer, total, inner]: its block
/// [outer, len, inner] from `start` along the axis, read through `map` (the operand
/// broadcast to the block's shape).
struct ConcatPart {
  BroadcastMap map;
  int64_t len = 0, start = 0;
};

/// The parts of concat_axis's operands `xs` in its result `y`, joined along `axis` (an
/// index into y's shape), in operand order; both backends' kernels are these blocks.
inline absl::StatusOr<std::vector<ConcatPart>> concatParts(const std::vector<ir::Shape>& xs,
                                                           const ir::Shape& y, size_t axis,
                                                           absl::string_view where) {
  std::vector<ConcatPart> parts;
  int64_t start = 0;
  for (const ir::Shape& x : xs) {
    ir::Shape block = y;
    block[axis] = x[axis];
    absl::StatusOr<BroadcastMap> map = broadcastMap(x, block, where);
    if (!map.ok()) return map.status();
    parts.push_back(ConcatPart{.map = *map, .len = x[axis], .start = start});
    start += x[axis];
  }
  return parts;
}

#endif  // !defined(__CUDACC__)

}  // namespace tandem::backend
