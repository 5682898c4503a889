#pragma once

// The order in which clip.cu adds the squares of one gradient, compiled for the GPU and
// by the host tests: thread t of block b (T threads, B blocks) adds elements b*T + t,
// stepping by B*T, then a block's T sums are added in a fixed tree. The host tests replay
// it to check the factor against the CPU kernel's.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// The sum thread `t` of block `b` makes: elements i = (k * blocks + b) * threads + t.
template <typename Load>
TANDEM_HD double clipThreadSum(Load load, int64_t n, int64_t blocks, int threads, int64_t b,
                               int t) {
  double s = 0;
  for (int64_t i = b * threads + t; i < n; i += blocks * threads) {
    const double v = load(i);
    s += v * v;
  }
  return s;
}

/// The tree over a block's `threads` sums (a power of two), in place: sums[0] is the total.
TANDEM_HD void clipTreeSum(double* sums, int threads) {
  for (int half = threads / 2; half > 0; half /= 2)
    for (int t = 0; t < half; ++t) sums[t] += sums[t + half];
}

}  // namespace tandem::backend::cuda
