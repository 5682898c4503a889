#pragma once

// AdamW's own kernel (adamw.cu), enqueued on `stream`; callers check cudaGetLastError. In
// place on w, m and v (f32), with an f32 or bf16 (uint16_t bits) gradient, n elements
// each. Math in backend/adamw_math.h (the CPU loop's, bit for bit).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/adamw_math.h"
#include "backend/cuda/optimizer_plan.h"

namespace tandem::backend::cuda {

void launchAdamWUpdate(float* w, const float* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream);
void launchAdamWUpdate(float* w, const uint16_t* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream);

/// adamw_update's step: the update's number is *step + 1 (step: the parameter's f32[1]
/// count in device memory, which it then increments), its scalars made on the device
/// (adamwScalarsAt), with the lr times *lr_factor when that is not null.
void launchAdamWUpdate(float* w, const float* g, float* m, float* v, int64_t n, float* step,
                       const AdamWHyper& h, const float* lr_factor, cudaStream_t stream);
void launchAdamWUpdate(float* w, const uint16_t* g, float* m, float* v, int64_t n, float* step,
                       const AdamWHyper& h, const float* lr_factor, cudaStream_t stream);

/// One launch of adamw_update_group: the table's parameters (gradients f32, or bf16 when
/// `bf16_grad`), `blocks` of them (the table's last prefix sum), each with the scalars of
/// its own count, which it then increments.
void launchAdamWUpdateGroup(const AdamwGroupTable& table, int64_t blocks, bool bf16_grad,
                            const AdamWHyper& h, const float* lr_factor, cudaStream_t stream);

}  // namespace tandem::backend::cuda
