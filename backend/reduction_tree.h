#pragma once

// The pieces of the fixed pairwise reduction tree every communicator reduces in (the
// local one, the one across processes, and the CUDA same-GPU one plans the same order):
// n ranks split at the largest power of two below n, both halves reduced, then combined.
// One order everywhere is what makes runs bit-identical whatever the split.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/bf16.h"
#include "backend/communicator.h"

namespace tandem::backend {

/// The largest power of two below n (n >= 2): where the pairwise tree splits n ranks.
inline size_t treeSplit(size_t n) {
  size_t p = 1;
  while (p * 2 < n) p *= 2;
  return p;
}

template <typename T>
T combine(T a, T b, ReduceOp op) {
  return op == ReduceOp::kMax ? std::max(a, b) : a + b;
}

/// What a tensor of element type T is reduced in: T itself, but float for bf16, whose
/// sums are rounded once, at the end (a bf16 running sum would round at every device).
template <typename T>
using Accumulator = std::conditional_t<std::is_same_v<T, bf16>, float, T>;

/// Calls fn(T{}) with T the C++ element type of `t` (bf16 for bf16), so that one generic
/// lambda serves every dtype a collective carries.
template <typename Fn>
void byElementType(ir::DType t, const Fn& fn) {
  switch (t) {
    case ir::DType::kI32:
      return fn(int32_t{});
    case ir::DType::kF64:
      return fn(double{});
    case ir::DType::kI64:
      return fn(int64_t{});
    case ir::DType::kBF16:
      return fn(bf16{});
    case ir::DType::kF32:
      return fn(float{});
  }
}

/// Elements reduced at a time, so that the inner loops vectorize over a stack buffer.
inline constexpr int64_t kReduceChunk = 1024;

// out[0, n) = the tree reduction of srcs[lo, hi) at [first, first + n): one level of the
// tree per recursion, a chunk at a time so the inner loops vectorize.
template <typename T, typename A = Accumulator<T>>
void treeReduceChunk(const std::vector<const T*>& srcs, size_t lo, size_t hi, int64_t first,
                     int64_t n, ReduceOp op, A* out) {
  if (hi - lo == 1) {
    const T* a = srcs[lo] + first;
    for (int64_t i = 0; i < n; ++i) out[i] = a[i];
    return;
  }
  if (hi - lo == 2) {
    const T *a = srcs[lo] + first, *b = srcs[lo + 1] + first;
    for (int64_t i = 0; i < n; ++i) out[i] = combine<A>(a[i], b[i], op);
    return;
  }
  const size_t mid = lo + treeSplit(hi - lo);
  A right[kReduceChunk];
  treeReduceChunk(srcs, lo, mid, first, n, op, out);
  treeReduceChunk(srcs, mid, hi, first, n, op, right);
  for (int64_t i = 0; i < n; ++i) out[i] = combine(out[i], right[i], op);
}

}  // namespace tandem::backend
