#pragma once

// The pieces of the fixed pairwise reduction tree every communicator reduces in (the
// local one, the one across processes, and the CUDA same-GPU one plans the same order):
// n ranks split at the largest power of two below n, both halves reduced, then combined.
// One order everywhere is what makes runs bit-identical whatever the split.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/communicator.h"
#include "backend/cpu/bf16.h"

namespace tandem::backend::cpu {

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

/// Elements reduced at a time, so that the inner loops vectorize over a stack buffer.
inline constexpr int64_t kReduceChunk = 1024;

}  // namespace tandem::backend::cpu
