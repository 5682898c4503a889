#pragma once

// AdamW's own kernel (adamw.cu), enqueued on `stream`; callers check cudaGetLastError. In
// place on w, m and v (f32), with an f32 or bf16 (uint16_t bits) gradient, n elements
// each. Math in backend/adamw_math.h (the CPU loop's, bit for bit).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/adamw_math.h"

namespace tandem::backend::cuda {

void launchAdamWUpdate(float* w, const float* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream);
void launchAdamWUpdate(float* w, const uint16_t* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream);

}  // namespace tandem::backend::cuda
