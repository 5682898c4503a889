#pragma once

#include <cstdint>

#include "backend/tensor_view.h"

namespace tandem::backend::cpu {

/// Copies slice `[offset, offset + part.dim(axis))` of `whole` along `axis` into `part`
/// (split_and_load), or back when `into_whole` (gather). Row-major, any axis, host memory.
void copySlice(const TensorView& whole, const TensorView& part, int axis, int64_t offset,
               bool into_whole);

}  // namespace tandem::backend::cpu
