// Own kernels along one axis: layer norm, softmax and log-softmax (one warp per row,
// lanes striding over the row, their partial results combined by warp_reduce.cuh's
// butterflies), layer norm's parameter gradients (one thread per column, rows in order)
// and sum and mean over an axis (one thread per output, the axis in order). No atomics:
// every run gives the same bits. Math in row_math.h, as the host tests check it.

#include "backend/cuda/elementwise_map.cuh"
#include "backend/cuda/grid.h"
#include "backend/cuda/row_math.h"
#include "backend/cuda/rows_launch.h"
#include "backend/cuda/warp_reduce.cuh"

namespace tandem::backend::cuda {
namespace {

constexpr int kRowThreads = 256;  // 8 warps, 8 rows at a time per block

/// Blocks for one warp per row: as many as rows need, up to what fills this GPU (grid.h;
/// the warps stride over the rest).
unsigned rowBlocks(int64_t rows) { return gridBlocks(rows, kRowThreads / kWarpLanes); }

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    layerNormKernel(const T* x, const float* gamma, const float* beta, T* y, float* mean,
                    float* var, int64_t rows, int64_t width, float eps) {
  const int lane = laneIndex();
  const float n = static_cast<float>(width);
  for (int64_t r = gridWarp(); r < rows; r += gridWarps()) {
    const T* row = x + r * width;
    const float m = warpButterflySum(laneRowSum(row, width, lane, kWarpLanes)) / n;
    const float v = warpButterflySum(laneRowSquaredDeviation(row, width, m, lane, kWarpLanes)) / n;
    const float rstd = layerNormRstd(v, eps);
    for (int64_t j = lane; j < width; j += kWarpLanes)
      store(y, r * width + j, layerNormOut(load(row, j), m, rstd, gamma[j], beta[j]));
    if (lane == 0) {
      mean[r] = m;
      var[r] = v;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    layerNormBackwardKernel(const T* x, const T* dy, const float* mean, const float* var,
                            const float* gamma, T* dx, int64_t rows, int64_t width, float eps) {
  const int lane = laneIndex();
  const float n = static_cast<float>(width);
  for (int64_t r = gridWarp(); r < rows; r += gridWarps()) {
    const T* xr = x + r * width;
    const T* dyr = dy + r * width;
    const float m = mean[r], rstd = layerNormRstd(var[r], eps);
    const LayerNormGradSums s =
        laneLayerNormGradSums(xr, dyr, gamma, width, m, rstd, lane, kWarpLanes);
    const float mean_g = warpButterflySum(s.g) / n, mean_gx = warpButterflySum(s.gx) / n;
    for (int64_t j = lane; j < width; j += kWarpLanes)
      store(dx, r * width + j,
            layerNormGradIn(load(xr, j), load(dyr, j), gamma[j], m, rstd, mean_g, mean_gx));
  }
}

template <typename T>
__global__ void layerNormParamGradsKernel(const T* x, const T* dy, const float* mean,
                                          const float* var, float* dgamma, float* dbeta,
                                          int64_t rows, int64_t width, float eps) {
  for (int64_t c = gridStart(); c < width; c += gridStride()) {
    const LayerNormParamGrads g = layerNormParamGrads(x, dy, mean, var, eps, rows, width, c);
    dgamma[c] = g.dgamma;
    dbeta[c] = g.dbeta;
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    softmaxKernel(const T* x, T* y, AxisSplit d, bool log) {
  const int lane = laneIndex();
  for (int64_t q = gridWarp(); q < d.outer * d.inner; q += gridWarps()) {
    const int64_t base = q / d.inner * d.axis * d.inner + q % d.inner;
    const T* row = x + base;
    const float max = warpButterflyMax(laneRowMax(row, d.axis, d.inner, lane, kWarpLanes));
    const float sum = warpButterflySum(laneRowExpSum(row, d.axis, d.inner, max, lane, kWarpLanes));
    for (int64_t j = lane; j < d.axis; j += kWarpLanes)
      store(y, base + j * d.inner, softmaxOut(load(row, j * d.inner), max, sum, log));
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    softmaxBackwardKernel(const T* y, const T* dy, T* dx, AxisSplit d, bool log) {
  const int lane = laneIndex();
  for (int64_t q = gridWarp(); q < d.outer * d.inner; q += gridWarps()) {
    const int64_t base = q / d.inner * d.axis * d.inner + q % d.inner;
    const float sum = warpButterflySum(
        laneSoftmaxGradSum(y + base, dy + base, d.axis, d.inner, log, lane, kWarpLanes));
    for (int64_t j = lane; j < d.axis; j += kWarpLanes) {
      const int64_t at = base + j * d.inner;
      store(dx, at, softmaxGradIn(load(y, at), load(dy, at), sum, log));
    }
  }
}

template <typename T>
__global__ void axisSumKernel(const T* x, T* y, AxisSplit d, float scale) {
  for (int64_t t = gridStart(); t < d.outer * d.inner; t += gridStride())
    store(y, t, axisSum(x, t / d.inner, t % d.inner, d.axis, d.inner, scale));
}

template <typename T>
__global__ void axisSpreadKernel(const T* dy, T* dx, AxisSplit d, float scale) {
  for (int64_t t = gridStart(); t < d.numElements(); t += gridStride())
    store(dx, t, axisSpread(dy, t, d.axis, d.inner, scale));
}

float meanScale(const AxisSplit& d, bool mean) {
  return mean ? 1.0f / static_cast<float>(d.axis) : 1.0f;
}

template <typename T>
void layerNorm(const T* x, const float* gamma, const float* beta, T* y, float* mean, float* var,
               int64_t rows, int64_t width, float eps, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  layerNormKernel<<<rowBlocks(rows), kRowThreads, 0, stream>>>(x, gamma, beta, y, mean, var, rows,
                                                               width, eps);
}

template <typename T>
void layerNormBackward(const T* x, const T* dy, const float* mean, const float* var,
                       const float* gamma, T* dx, float* dgamma, float* dbeta, int64_t rows,
                       int64_t width, float eps, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  layerNormBackwardKernel<<<rowBlocks(rows), kRowThreads, 0, stream>>>(x, dy, mean, var, gamma, dx,
                                                                       rows, width, eps);
  layerNormParamGradsKernel<<<mapBlocks(width), kMapThreads, 0, stream>>>(x, dy, mean, var, dgamma,
                                                                          dbeta, rows, width, eps);
}

template <typename T>
void softmax(const T* x, T* y, const AxisSplit& d, bool log, cudaStream_t stream) {
  if (d.numElements() <= 0) return;
  softmaxKernel<<<rowBlocks(d.outer * d.inner), kRowThreads, 0, stream>>>(x, y, d, log);
}

template <typename T>
void softmaxBackward(const T* y, const T* dy, T* dx, const AxisSplit& d, bool log,
                     cudaStream_t stream) {
  if (d.numElements() <= 0) return;
  softmaxBackwardKernel<<<rowBlocks(d.outer * d.inner), kRowThreads, 0, stream>>>(y, dy, dx, d,
                                                                                  log);
}

template <typename T>
void sumOverAxis(const T* x, T* y, const AxisSplit& d, bool mean, cudaStream_t stream) {
  if (d.outer * d.inner <= 0) return;
  axisSumKernel<<<mapBlocks(d.outer * d.inner), kMapThreads, 0, stream>>>(x, y, d,
                                                                          meanScale(d, mean));
}

template <typename T>
void spreadOverAxis(const T* dy, T* dx, const AxisSplit& d, bool mean, cudaStream_t stream) {
  if (d.numElements() <= 0) return;
  axisSpreadKernel<<<mapBlocks(d.numElements()), kMapThreads, 0, stream>>>(dy, dx, d,
                                                                           meanScale(d, mean));
}

}  // namespace

void launchLayerNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                     float* var, int64_t rows, int64_t width, float eps, cudaStream_t stream) {
  layerNorm(x, gamma, beta, y, mean, var, rows, width, eps, stream);
}
void launchLayerNorm(const uint16_t* x, const float* gamma, const float* beta, uint16_t* y,
                     float* mean, float* var, int64_t rows, int64_t width, float eps,
                     cudaStream_t stream) {
  layerNorm(x, gamma, beta, y, mean, var, rows, width, eps, stream);
}

void launchLayerNormBackward(const float* x, const float* dy, const float* mean, const float* var,
                             const float* gamma, float* dx, float* dgamma, float* dbeta,
                             int64_t rows, int64_t width, float eps, cudaStream_t stream) {
  layerNormBackward(x, dy, mean, var, gamma, dx, dgamma, dbeta, rows, width, eps, stream);
}
void launchLayerNormBackward(const uint16_t* x, const uint16_t* dy, const float* mean,
                             const float* var, const float* gamma, uint16_t* dx, float* dgamma,
                             float* dbeta, int64_t rows, int64_t width, float eps,
                             cudaStream_t stream) {
  layerNormBackward(x, dy, mean, var, gamma, dx, dgamma, dbeta, rows, width, eps, stream);
}

void launchSoftmax(const float* x, float* y, const AxisSplit& dims, bool log, cudaStream_t stream) {
  softmax(x, y, dims, log, stream);
}
void launchSoftmax(const uint16_t* x, uint16_t* y, const AxisSplit& dims, bool log,
                   cudaStream_t stream) {
  softmax(x, y, dims, log, stream);
}

void launchSoftmaxBackward(const float* y, const float* dy, float* dx, const AxisSplit& dims,
                           bool log, cudaStream_t stream) {
  softmaxBackward(y, dy, dx, dims, log, stream);
}
void launchSoftmaxBackward(const uint16_t* y, const uint16_t* dy, uint16_t* dx,
                           const AxisSplit& dims, bool log, cudaStream_t stream) {
  softmaxBackward(y, dy, dx, dims, log, stream);
}

void launchAxisSum(const float* x, float* y, const AxisSplit& dims, bool mean,
                   cudaStream_t stream) {
  sumOverAxis(x, y, dims, mean, stream);
}
void launchAxisSum(const uint16_t* x, uint16_t* y, const AxisSplit& dims, bool mean,
                   cudaStream_t stream) {
  sumOverAxis(x, y, dims, mean, stream);
}

void launchAxisSpread(const float* dy, float* dx, const AxisSplit& dims, bool mean,
                      cudaStream_t stream) {
  spreadOverAxis(dy, dx, dims, mean, stream);
}
void launchAxisSpread(const uint16_t* dy, uint16_t* dx, const AxisSplit& dims, bool mean,
                      cudaStream_t stream) {
  spreadOverAxis(dy, dx, dims, mean, stream);
}

}  // namespace tandem::backend::cuda
