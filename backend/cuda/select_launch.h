#pragma once

// Launch of the own kernel of compare, where, mod and mod_backward (select.cu), enqueued
// on `stream`; callers check cudaGetLastError. One thread per result element in a
// grid-stride loop; the math is select_at.h's.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/select_at.h"

namespace tandem::backend::cuda {

/// y (n elements, bf16 bits when `y_bf16`, else f32) = selectAt(ops, i).
void launchSelect(const SelectOperands& ops, void* y, bool y_bf16, int64_t n, cudaStream_t stream);

}  // namespace tandem::backend::cuda
