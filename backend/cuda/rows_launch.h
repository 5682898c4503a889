#pragma once

// Own kernels that work along one axis (rows.cu): layer norm, softmax and log-softmax,
// sum and mean over an axis, enqueued on `stream`; callers check cudaGetLastError.
// Element types: float (f32) and uint16_t (bf16 bits); statistics, gamma, beta and their
// gradients are f32. One warp per row, lanes combined in a fixed butterfly order, so
// every run gives the same bits. Math in row_math.h.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/axis_split.h"

namespace tandem::backend::cuda {

/// y = layer_norm(x[rows, width]) * gamma + beta; mean and var (biased) per row.
void launchLayerNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                     float* var, int64_t rows, int64_t width, float eps, cudaStream_t stream);
void launchLayerNorm(const uint16_t* x, const float* gamma, const float* beta, uint16_t* y,
                     float* mean, float* var, int64_t rows, int64_t width, float eps,
                     cudaStream_t stream);

/// dx from x, dy and the forward's statistics; dgamma and dbeta summed over the rows in
/// row order (one thread per column: to be measured, docs/GPU.md).
void launchLayerNormBackward(const float* x, const float* dy, const float* mean, const float* var,
                             const float* gamma, float* dx, float* dgamma, float* dbeta,
                             int64_t rows, int64_t width, float eps, cudaStream_t stream);
void launchLayerNormBackward(const uint16_t* x, const uint16_t* dy, const float* mean,
                             const float* var, const float* gamma, uint16_t* dx, float* dgamma,
                             float* dbeta, int64_t rows, int64_t width, float eps,
                             cudaStream_t stream);

/// Softmax (or log-softmax) of x over dims.axis; y may be x.
void launchSoftmax(const float* x, float* y, const AxisSplit& dims, bool log, cudaStream_t stream);
void launchSoftmax(const uint16_t* x, uint16_t* y, const AxisSplit& dims, bool log,
                   cudaStream_t stream);

/// dx from the forward's output y and dy; dx may be dy.
void launchSoftmaxBackward(const float* y, const float* dy, float* dx, const AxisSplit& dims,
                           bool log, cudaStream_t stream);
void launchSoftmaxBackward(const uint16_t* y, const uint16_t* dy, uint16_t* dx,
                           const AxisSplit& dims, bool log, cudaStream_t stream);

/// y[outer, inner] = sum over the axis (times 1/axis when `mean`).
void launchAxisSum(const float* x, float* y, const AxisSplit& dims, bool mean, cudaStream_t stream);
void launchAxisSum(const uint16_t* x, uint16_t* y, const AxisSplit& dims, bool mean,
                   cudaStream_t stream);

/// dx[outer, axis, inner] = dy[outer, inner] (times 1/axis when `mean`).
void launchAxisSpread(const float* dy, float* dx, const AxisSplit& dims, bool mean,
                      cudaStream_t stream);
void launchAxisSpread(const uint16_t* dy, uint16_t* dx, const AxisSplit& dims, bool mean,
                      cudaStream_t stream);

}  // namespace tandem::backend::cuda
