// Own kernels of the elementwise family: fills, the unary ops of backend/unary_math.h (relu, ...)
// and their backward ops, add, casts and global average pooling. Memory bound: grid-stride loops
// that move 16 bytes per access (elementwise_map.cuh); the math is elementwise_math.h's, as the
// host tests check it.

#include "backend/cuda/elementwise_launch.h"
#include "backend/cuda/elementwise_map.cuh"
#include "backend/cuda/elementwise_math.h"
#include "backend/narrow_ids.h"
#include "backend/unary_math.h"

namespace tandem::backend::cuda {
namespace {

template <typename T>
struct Fill {
  T value;
  __device__ T operator()() const { return value; }
};

template <typename Op>
struct UnaryForward {
  __device__ float operator()(float x) const { return Op::forward(x); }
};

template <typename Op>
struct UnaryBackward {
  __device__ float operator()(float dy, float v) const { return Op::backward(dy, v); }
};

// clip and clip_backward over [lo, hi] (backend/unary_math.h).
struct ClipForward {
  float lo, hi;
  __device__ float operator()(float x) const { return clipValue(x, lo, hi); }
};
struct ClipBackward {
  float lo, hi;
  __device__ float operator()(float dy, float x) const { return clipBackwardValue(dy, x, lo, hi); }
};

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return addValue(a, b);
  }
};

// i64 -> i32, saturating (backend/narrow_ids.h).
struct NarrowId {
  __device__ int32_t operator()(int64_t v) const { return narrowId(v); }
};

struct Identity {
  __device__ float operator()(float x) const { return x; }
};

// One thread per plane, summing it in index order as the CPU does (the same bits); the
// planes of a global pool are small (7 x 7 in ResNets) and many (N x C).
template <typename T>
__global__ void globalAvgPoolKernel(const T* x, T* y, int64_t planes, int64_t hw, float scale,
                                    int64_t step) {
  for (int64_t p = gridStart(); p < planes; p += gridStride())
    store(y, p, planeMean(x, p, hw, scale, step));
}

template <typename T>
__global__ void globalAvgPoolBackwardKernel(const T* dy, T* dx, int64_t n, int64_t hw, float scale,
                                            int64_t step) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    store(dx, i, globalPoolGrad(dy, i, hw, scale, step));
}

template <typename T>
void globalAvgPool(const T* x, T* y, int64_t planes, int64_t hw, int64_t step,
                   cudaStream_t stream) {
  if (planes <= 0 || hw <= 0) return;
  globalAvgPoolKernel<<<mapBlocks(planes), kMapThreads, 0, stream>>>(x, y, planes, hw,
                                                                     globalPoolScale(hw), step);
}

template <typename T>
void globalAvgPoolBackward(const T* dy, T* dx, int64_t planes, int64_t hw, int64_t step,
                           cudaStream_t stream) {
  const int64_t n = planes * hw;
  if (n <= 0) return;
  globalAvgPoolBackwardKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(dy, dx, n, hw,
                                                                        globalPoolScale(hw), step);
}

}  // namespace

void launchFill(float* y, int64_t n, float value, cudaStream_t stream) {
  launchMap0(y, n, Fill<float>{value}, stream);
}
void launchFill(int32_t* y, int64_t n, int32_t value, cudaStream_t stream) {
  launchMap0(y, n, Fill<int32_t>{value}, stream);
}

template <typename Op>
void launchUnary(const float* x, float* y, int64_t n, cudaStream_t stream) {
  launchMap1(x, y, n, UnaryForward<Op>{}, stream);
}
template <typename Op>
void launchUnary(const uint16_t* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  launchMap1(x, y, n, UnaryForward<Op>{}, stream);
}

template <typename Op>
void launchUnaryBackward(const float* dy, const float* v, float* dx, int64_t n,
                         cudaStream_t stream) {
  launchMap2(dy, v, dx, n, UnaryBackward<Op>{}, stream);
}
template <typename Op>
void launchUnaryBackward(const uint16_t* dy, const uint16_t* v, uint16_t* dx, int64_t n,
                         cudaStream_t stream) {
  launchMap2(dy, v, dx, n, UnaryBackward<Op>{}, stream);
}

// The launches of every unary op of backend/unary_math.h (the spec's list), f32 and bf16.
#define TANDEM_INSTANTIATE_UNARY(Name)                                                       \
  template void launchUnary<Name##Math>(const float*, float*, int64_t, cudaStream_t);        \
  template void launchUnary<Name##Math>(const uint16_t*, uint16_t*, int64_t, cudaStream_t);  \
  template void launchUnaryBackward<Name##Math>(const float*, const float*, float*, int64_t, \
                                                cudaStream_t);                               \
  template void launchUnaryBackward<Name##Math>(const uint16_t*, const uint16_t*, uint16_t*, \
                                                int64_t, cudaStream_t);
TANDEM_UNARY_ELEMENTWISE_OPS(TANDEM_INSTANTIATE_UNARY)
#undef TANDEM_INSTANTIATE_UNARY

void launchClip(const float* x, float* y, int64_t n, float lo, float hi, cudaStream_t stream) {
  launchMap1(x, y, n, ClipForward{lo, hi}, stream);
}
void launchClip(const uint16_t* x, uint16_t* y, int64_t n, float lo, float hi,
                cudaStream_t stream) {
  launchMap1(x, y, n, ClipForward{lo, hi}, stream);
}
void launchClipBackward(const float* dy, const float* x, float* dx, int64_t n, float lo, float hi,
                        cudaStream_t stream) {
  launchMap2(dy, x, dx, n, ClipBackward{lo, hi}, stream);
}
void launchClipBackward(const uint16_t* dy, const uint16_t* x, uint16_t* dx, int64_t n, float lo,
                        float hi, cudaStream_t stream) {
  launchMap2(dy, x, dx, n, ClipBackward{lo, hi}, stream);
}

void launchAdd(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  launchMap2(a, b, c, n, Add{}, stream);
}
void launchAdd(const uint16_t* a, const uint16_t* b, uint16_t* c, int64_t n, cudaStream_t stream) {
  launchMap2(a, b, c, n, Add{}, stream);
}
void launchAdd(const int32_t* a, const int32_t* b, int32_t* c, int64_t n, cudaStream_t stream) {
  launchMap2(a, b, c, n, Add{}, stream);
}

void launchCast(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  launchMap1(x, y, n, Identity{}, stream);
}
void launchCast(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  launchMap1(x, y, n, Identity{}, stream);
}
void launchCast(const int64_t* x, int32_t* y, int64_t n, cudaStream_t stream) {
  launchMap1(x, y, n, NarrowId{}, stream);
}

void launchGlobalAvgPool(const float* x, float* y, int64_t planes, int64_t hw, int64_t step,
                         cudaStream_t stream) {
  globalAvgPool(x, y, planes, hw, step, stream);
}
void launchGlobalAvgPool(const uint16_t* x, uint16_t* y, int64_t planes, int64_t hw, int64_t step,
                         cudaStream_t stream) {
  globalAvgPool(x, y, planes, hw, step, stream);
}

void launchGlobalAvgPoolBackward(const float* dy, float* dx, int64_t planes, int64_t hw,
                                 int64_t step, cudaStream_t stream) {
  globalAvgPoolBackward(dy, dx, planes, hw, step, stream);
}
void launchGlobalAvgPoolBackward(const uint16_t* dy, uint16_t* dx, int64_t planes, int64_t hw,
                                 int64_t step, cudaStream_t stream) {
  globalAvgPoolBackward(dy, dx, planes, hw, step, stream);
}

}  // namespace tandem::backend::cuda
