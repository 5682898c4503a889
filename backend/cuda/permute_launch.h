#pragma once

// The launch of transpose's own kernel (permute.cu): y[i] = x[permuteSource(plan, i)] for
// n elements of `element_bytes` (2: bf16, 4: f32 or i32) each, a gather, one thread per
// element of y in a grid-stride loop.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/permute_math.h"

namespace tandem::backend::cuda {

void launchPermute(const void* x, void* y, int64_t n, int element_bytes, const PermutePlan& plan,
                   cudaStream_t stream);

}  // namespace tandem::backend::cuda
