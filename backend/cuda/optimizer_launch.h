#pragma once

// The SGD update's own kernel (optimizer.cu), enqueued on `stream`; callers check
// cudaGetLastError. In place on w (and m): f32 weights and momentum, an f32 or bf16
// (uint16_t bits) gradient, n elements each. Math in optimizer_math.h.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/optimizer_math.h"
#include "backend/cuda/optimizer_plan.h"

namespace tandem::backend::cuda {

/// One parameter's step; `m` is null without momentum.
void launchSgdUpdate(float* w, const float* g, float* m, int64_t n, const SgdHyper& p,
                     cudaStream_t stream);
void launchSgdUpdate(float* w, const uint16_t* g, float* m, int64_t n, const SgdHyper& p,
                     cudaStream_t stream);

/// One launch of sgd_update_group's multi-tensor kernel: the table's parameters (gradients
/// f32, or bf16 when `bf16_grad`; momentum buffers read when `momentum`), `blocks` of them
/// (the table's last prefix sum).
void launchSgdUpdateGroup(const SgdGroupTable& table, int64_t blocks, bool momentum, bool bf16_grad,
                          const SgdHyper& p, cudaStream_t stream);

}  // namespace tandem::backend::cuda
