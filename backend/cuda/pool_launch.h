#pragma once

// Own pooling kernels (pool.cu), enqueued on `stream`; callers check cudaGetLastError.
// Element types: float (f32) or uint16_t (bf16 bits). Per-element math in pool_math.h.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pool_math.h"

namespace tandem::backend::cuda {

/// y = max_pool2d(x) / avg_pool2d(x): planes x oh x ow outputs from planes x h x w inputs.
void launchMaxPool(const float* x, float* y, const PoolParams& p, cudaStream_t stream);
void launchMaxPool(const uint16_t* x, uint16_t* y, const PoolParams& p, cudaStream_t stream);
void launchAvgPool(const float* x, float* y, const PoolParams& p, cudaStream_t stream);
void launchAvgPool(const uint16_t* x, uint16_t* y, const PoolParams& p, cudaStream_t stream);

/// dx of max_pool2d and of avg_pool2d (from dy and x; average pooling reads x only with
/// p.relu): every element of dx is written (zero where no window sends anything).
void launchMaxPoolBackward(const float* dy, const float* x, float* dx, const PoolParams& p,
                           cudaStream_t stream);
void launchMaxPoolBackward(const uint16_t* dy, const uint16_t* x, uint16_t* dx, const PoolParams& p,
                           cudaStream_t stream);
void launchAvgPoolBackward(const float* dy, const float* x, float* dx, const PoolParams& p,
                           cudaStream_t stream);
void launchAvgPoolBackward(const uint16_t* dy, const uint16_t* x, uint16_t* dx, const PoolParams& p,
                           cudaStream_t stream);

}  // namespace tandem::backend::cuda
