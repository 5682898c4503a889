#pragma once

// Per-element math of the linear family's own kernels (f32 -> bf16 weight conversion is
// host_device.h's floatToBf16): compiled for the GPU and by the host tests.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// The sum of column `col` of a row-major [rows, cols] matrix (the bias gradient: column
/// sums of dy), accumulated in f32 in row order, so every run gives the same bits.
template <typename T>
TANDEM_HD float columnSum(const T* m, int64_t rows, int64_t cols, int64_t col) {
  float s = 0.0f;
  for (int64_t r = 0; r < rows; ++r) s += load(m, r * cols + col);
  return s;
}

/// The column of element `i` of a row-major matrix `cols` wide: where a broadcast row's
/// value comes from.
TANDEM_HD int64_t rowColumn(int64_t i, int64_t cols) { return i % cols; }

}  // namespace tandem::backend::cuda
