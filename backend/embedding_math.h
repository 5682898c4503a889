#pragma once

// Embedding lookup's per-element rules, shared by the CPU loops
// (backend/cpu/embedding_core.h) and the CUDA kernels. The backward pass adds the rows
// of dy into the table's gradient token by token in index order: each element of dtable
// gets its additions in the same order on every backend, device count and run, so the
// gradient is bit-reproducible (unlike a scatter-add with atomics, as PyTorch's CUDA
// embedding backward is unless deterministic algorithms are asked for).

#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

/// The table row of token `index`, or -1 when it is outside [0, vocab).
TANDEM_HD int64_t embeddingRow(int32_t index, int64_t vocab) {
  return index >= 0 && static_cast<int64_t>(index) < vocab ? static_cast<int64_t>(index) : -1;
}

/// dtable[.., column] for one column: dy's column added token by token (index order),
/// skipping tokens outside the table. `load` reads dy's element as float. The CPU runs
/// the same additions with the loops swapped (tokens outer), which visits each element's
/// additions in the same order.
template <typename T, typename Load>
TANDEM_HD void embeddingGradColumn(const T* dy, const int32_t* index, int64_t tokens, int64_t vocab,
                                   int64_t width, int64_t column, float* dtable, Load load) {
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t row = embeddingRow(index[i], vocab);
    if (row >= 0) dtable[row * width + column] += load(dy, i * width + column);
  }
}

}  // namespace tandem::backend
