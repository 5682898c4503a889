#pragma once

// transpose's per-element index math, compiled for the GPU (permute.cu) and by the host
// tests, which check it against the CPU kernel (a oneDNN reorder) bit for bit: a
// permutation moves values, so both sides must give the same bytes.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// The most axes a transpose takes on CUDA (a plan is passed by value to the kernel).
inline constexpr int kMaxPermuteRank = 8;

/// y's sizes and, for each axis of y, the stride of x along it (x's axis perm[i]).
struct PermutePlan {
  int rank = 0;
  int64_t y_sizes[kMaxPermuteRank] = {};
  int64_t x_strides[kMaxPermuteRank] = {};
};

/// The plan of y = x permuted by `perm` (y.shape[i] = x_shape[perm[i]]), x row-major.
inline PermutePlan permutePlan(const int64_t* x_shape, const int64_t* perm, int rank) {
  PermutePlan p;
  p.rank = rank;
  int64_t x_strides[kMaxPermuteRank];
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    x_strides[i] = stride;
    stride *= x_shape[i];
  }
  for (int i = 0; i < rank; ++i) {
    p.y_sizes[i] = x_shape[perm[i]];
    p.x_strides[i] = x_strides[perm[i]];
  }
  return p;
}

/// The offset in x of y's element i (row-major).
TANDEM_HD int64_t permuteSource(const PermutePlan& p, int64_t i) {
  int64_t src = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t q = i / p.y_sizes[d];
    src += (i - q * p.y_sizes[d]) * p.x_strides[d];
    i = q;
  }
  return src;
}

}  // namespace tandem::backend::cuda
