// Own kernels of scale, the broadcasting add and mul, concat_axis and slice_axis (forward
// and backward). Why our own: cuDNN's op tensor broadcasts only its second operand and
// takes neither bf16 beside f32 nor rank-3 row-major tensors without descriptors per
// shape, and concatenation and slicing are plain gathers; each is memory bound, one thread
// per result element. Math in broadcast_math.h (host-tested against the CPU kernels).

#include <type_traits>

#include "backend/cuda/broadcast_launch.h"
#include "backend/cuda/broadcast_math.h"
#include "backend/cuda/elementwise_map.cuh"

namespace tandem::backend::cuda {
namespace {

template <typename X, typename Y>
__global__ void scaleKernel(const X* x, Y* y, float factor, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) scaleAt(x, y, factor, i);
}

template <typename A, typename B, typename Y>
__global__ void broadcastBinaryKernel(const A* a, const B* b, Y* y, BroadcastMap ma,
                                      BroadcastMap mb, bool mul, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    broadcastBinaryAt(a, b, y, ma, mb, mul, i);
}

template <typename X, typename Y>
__global__ void concatPartKernel(const X* x, Y* y, BroadcastMap map, int64_t len, int64_t inner,
                                 int64_t total, int64_t start, int64_t n) {
  for (int64_t t = gridStart(); t < n; t += gridStride())
    concatPartAt(x, y, map, len, inner, total, start, t);
}

template <typename T>
__global__ void sliceKernel(const T* x, T* y, int64_t len, int64_t inner, int64_t size,
                            int64_t start, int64_t n) {
  for (int64_t t = gridStart(); t < n; t += gridStride()) sliceAt(x, y, len, inner, size, start, t);
}

template <typename T>
__global__ void sliceBackwardKernel(const T* dy, T* dx, int64_t len, int64_t inner, int64_t size,
                                    int64_t start, int64_t n) {
  for (int64_t t = gridStart(); t < n; t += gridStride())
    sliceBackwardAt(dy, dx, len, inner, size, start, t);
}

/// Calls f with a null pointer of the element type a flag names (uint16_t: bf16).
template <typename F>
void withType(bool bf16, F f) {
  if (bf16)
    f(static_cast<uint16_t*>(nullptr));
  else
    f(static_cast<float*>(nullptr));
}

template <typename P>
using Elem = std::remove_pointer_t<P>;

}  // namespace

void launchScale(const void* x, void* y, bool bf16, float factor, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withType(bf16, [&](auto tag) {
    using T = Elem<decltype(tag)>;
    scaleKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(static_cast<const T*>(x),
                                                          static_cast<T*>(y), factor, n);
  });
}

void launchBroadcastBinary(const void* a, bool a_bf16, const void* b, bool b_bf16, void* y,
                           bool y_bf16, const BroadcastMap& ma, const BroadcastMap& mb, bool mul,
                           int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  withType(a_bf16, [&](auto ta) {
    withType(b_bf16, [&](auto tb) {
      withType(y_bf16, [&](auto ty) {
        using A = Elem<decltype(ta)>;
        using B = Elem<decltype(tb)>;
        using Y = Elem<decltype(ty)>;
        broadcastBinaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(
            static_cast<const A*>(a), static_cast<const B*>(b), static_cast<Y*>(y), ma, mb, mul, n);
      });
    });
  });
}

void launchConcatPart(const void* x, bool x_bf16, void* y, bool y_bf16, const BroadcastMap& map,
                      int64_t outer, int64_t len, int64_t inner, int64_t total, int64_t start,
                      cudaStream_t stream) {
  const int64_t n = outer * len * inner;
  if (n <= 0) return;
  withType(x_bf16, [&](auto tx) {
    withType(y_bf16, [&](auto ty) {
      using X = Elem<decltype(tx)>;
      using Y = Elem<decltype(ty)>;
      concatPartKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(
          static_cast<const X*>(x), static_cast<Y*>(y), map, len, inner, total, start, n);
    });
  });
}

void launchSliceAxis(const void* in, void* out, int element_bytes, int64_t outer, int64_t len,
                     int64_t inner, int64_t size, int64_t start, bool backward,
                     cudaStream_t stream) {
  const int64_t n = outer * (backward ? size : len) * inner;
  if (n <= 0) return;
  auto go = [&](auto tag) {
    using T = Elem<decltype(tag)>;
    if (backward)
      sliceBackwardKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(
          static_cast<const T*>(in), static_cast<T*>(out), len, inner, size, start, n);
    else
      sliceKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(
          static_cast<const T*>(in), static_cast<T*>(out), len, inner, size, start, n);
  };
  if (element_bytes == 2)
    go(static_cast<uint16_t*>(nullptr));
  else
    go(static_cast<uint32_t*>(nullptr));
}

}  // namespace tandem::backend::cuda
