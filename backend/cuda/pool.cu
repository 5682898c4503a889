// Own pooling kernels: a grid-stride loop over the outputs (forward) or over the inputs
// (backward, gathering the windows over each input element, so no atomics and a fixed
// order of additions). Math in pool_math.h.

#include <algorithm>

#include "backend/cuda/grid.h"
#include "backend/cuda/pool_launch.h"
#include "backend/cuda/pool_math.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) { return gridBlocks(n, kThreads); }

template <typename T, bool kMax>
__global__ void poolKernel(const T* x, T* y, PoolParams p) {
  const int64_t per_plane = p.oh * p.ow, n = p.planes * per_plane;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PlanePixel at = poolElement(p, e, per_plane);
    const T* xp = x + poolPlaneBase(p, at.plane, p.h * p.w);
    const int64_t i = at.pixel / p.ow, j = at.pixel % p.ow;
    store(y, e, kMax ? maxPoolAt(xp, p, i, j) : avgPoolAt(xp, p, i, j));
  }
}

template <typename T, bool kMax>
__global__ void poolBackwardKernel(const T* dy, const T* x, T* dx, PoolParams p) {
  const int64_t per_plane = p.h * p.w, n = p.planes * per_plane;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PlanePixel at = poolElement(p, e, per_plane);
    const T* dyp = dy + poolPlaneBase(p, at.plane, p.oh * p.ow);
    const int64_t r = at.pixel / p.w, c = at.pixel % p.w;
    const T* xp = x + poolPlaneBase(p, at.plane, per_plane);
    store(dx, e, kMax ? maxPoolBackwardAt(dyp, xp, p, r, c) : avgPoolBackwardAt(dyp, xp, p, r, c));
  }
}

template <typename T, bool kMax>
void forward(const T* x, T* y, const PoolParams& p, cudaStream_t stream) {
  const int64_t n = p.planes * p.oh * p.ow;
  if (n <= 0) return;
  poolKernel<T, kMax><<<blocksFor(n), kThreads, 0, stream>>>(x, y, p);
}

template <typename T, bool kMax>
void backward(const T* dy, const T* x, T* dx, const PoolParams& p, cudaStream_t stream) {
  const int64_t n = p.planes * p.h * p.w;
  if (n <= 0) return;
  poolBackwardKernel<T, kMax><<<blocksFor(n), kThreads, 0, stream>>>(dy, x, dx, p);
}

}  // namespace

void launchMaxPool(const float* x, float* y, const PoolParams& p, cudaStream_t stream) {
  forward<float, true>(x, y, p, stream);
}
void launchMaxPool(const uint16_t* x, uint16_t* y, const PoolParams& p, cudaStream_t stream) {
  forward<uint16_t, true>(x, y, p, stream);
}
void launchAvgPool(const float* x, float* y, const PoolParams& p, cudaStream_t stream) {
  forward<float, false>(x, y, p, stream);
}
void launchAvgPool(const uint16_t* x, uint16_t* y, const PoolParams& p, cudaStream_t stream) {
  forward<uint16_t, false>(x, y, p, stream);
}
void launchMaxPoolBackward(const float* dy, const float* x, float* dx, const PoolParams& p,
                           cudaStream_t stream) {
  backward<float, true>(dy, x, dx, p, stream);
}
void launchMaxPoolBackward(const uint16_t* dy, const uint16_t* x, uint16_t* dx, const PoolParams& p,
                           cudaStream_t stream) {
  backward<uint16_t, true>(dy, x, dx, p, stream);
}
void launchAvgPoolBackward(const float* dy, const float* x, float* dx, const PoolParams& p,
                           cudaStream_t stream) {
  backward<float, false>(dy, x, dx, p, stream);
}
void launchAvgPoolBackward(const uint16_t* dy, const uint16_t* x, uint16_t* dx, const PoolParams& p,
                           cudaStream_t stream) {
  backward<uint16_t, false>(dy, x, dx, p, stream);
}

}  // namespace tandem::backend::cuda
