#pragma once

// Device-side helpers of the own elementwise kernels (elementwise.cu, optimizer.cu; nvcc
// only): grid-stride maps over contiguous arrays that move 16 bytes per access where the
// pointers allow it (4 f32 or i32, 8 bf16), and one element at a time otherwise.
//
// Each element reads only its own position of every operand, and a thread writes a pack
// after it has read that pack's operands, so a result may share an operand's buffer
// (in-place reuse by a memory planner), as on the CPU.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/grid.h"
#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

inline constexpr int kMapThreads = 256;

/// Blocks of kMapThreads for a grid-stride loop over `work` items: enough to fill this
/// GPU, no more (grid.h).
inline unsigned mapBlocks(int64_t work) { return gridBlocks(work, kMapThreads); }

/// V consecutive elements, loaded and stored as one access.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

/// How many elements one 16-byte access moves for the widest of the element types.
template <typename... T>
inline constexpr int kPackOf = static_cast<int>(16 / std::max({sizeof(T)...}));

/// Whether `p` may be read as Pack<T, V>s.
template <int V, typename T>
bool packAligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * V) == 0;
}

/// Storage -> computing type: f32 as is, bf16 bits widened exactly, i32 and i64 as is.
TANDEM_HD float widen(float x) { return x; }
TANDEM_HD float widen(uint16_t x) { return bf16ToFloat(x); }
TANDEM_HD int32_t widen(int32_t x) { return x; }
TANDEM_HD int64_t widen(int64_t x) { return x; }

/// Computing type -> storage: bf16 rounded to nearest even (host_device.h).
TANDEM_HD void put(float& dst, float v) { dst = v; }
TANDEM_HD void put(uint16_t& dst, float v) { dst = floatToBf16(v); }
TANDEM_HD void put(int32_t& dst, int32_t v) { dst = v; }

// The index of this thread in the grid, and the grid's size, as a grid-stride loop uses.
__device__ __forceinline__ int64_t gridStart() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t gridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

/// out[i] = f() for i < n.
template <int V, typename Out, typename F>
__global__ void map0Kernel(Out* out, int64_t n, F f) {
  const int64_t start = gridStart(), stride = gridStride(), packs = n / V;
  for (int64_t c = start; c < packs; c += stride) {
    Pack<Out, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) put(o.v[k], f());
    reinterpret_cast<Pack<Out, V>*>(out)[c] = o;
  }
  for (int64_t i = packs * V + start; i < n; i += stride) put(out[i], f());
}

/// out[i] = f(a[i]) for i < n.
template <int V, typename Out, typename A, typename F>
__global__ void map1Kernel(const A* a, Out* out, int64_t n, F f) {
  const int64_t start = gridStart(), stride = gridStride(), packs = n / V;
  for (int64_t c = start; c < packs; c += stride) {
    const Pack<A, V> pa = reinterpret_cast<const Pack<A, V>*>(a)[c];
    Pack<Out, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) put(o.v[k], f(widen(pa.v[k])));
    reinterpret_cast<Pack<Out, V>*>(out)[c] = o;
  }
  for (int64_t i = packs * V + start; i < n; i += stride) put(out[i], f(widen(a[i])));
}

/// out[i] = f(a[i], b[i]) for i < n.
template <int V, typename Out, typename A, typename B, typename F>
__global__ void map2Kernel(const A* a, const B* b, Out* out, int64_t n, F f) {
  const int64_t start = gridStart(), stride = gridStride(), packs = n / V;
  for (int64_t c = start; c < packs; c += stride) {
    const Pack<A, V> pa = reinterpret_cast<const Pack<A, V>*>(a)[c];
    const Pack<B, V> pb = reinterpret_cast<const Pack<B, V>*>(b)[c];
    Pack<Out, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) put(o.v[k], f(widen(pa.v[k]), widen(pb.v[k])));
    reinterpret_cast<Pack<Out, V>*>(out)[c] = o;
  }
  for (int64_t i = packs * V + start; i < n; i += stride) put(out[i], f(widen(a[i]), widen(b[i])));
}

// Launches: packed when every pointer allows it, else one element per access.
template <typename Out, typename F>
void launchMap0(Out* out, int64_t n, F f, cudaStream_t stream) {
  constexpr int V = kPackOf<Out>;
  if (n <= 0) return;
  if (packAligned<V>(out))
    map0Kernel<V><<<mapBlocks(std::max<int64_t>(n / V, 1)), kMapThreads, 0, stream>>>(out, n, f);
  else
    map0Kernel<1><<<mapBlocks(n), kMapThreads, 0, stream>>>(out, n, f);
}

template <typename Out, typename A, typename F>
void launchMap1(const A* a, Out* out, int64_t n, F f, cudaStream_t stream) {
  constexpr int V = kPackOf<Out, A>;
  if (n <= 0) return;
  if (packAligned<V>(a) && packAligned<V>(out))
    map1Kernel<V><<<mapBlocks(std::max<int64_t>(n / V, 1)), kMapThreads, 0, stream>>>(a, out, n, f);
  else
    map1Kernel<1><<<mapBlocks(n), kMapThreads, 0, stream>>>(a, out, n, f);
}

template <typename Out, typename A, typename B, typename F>
void launchMap2(const A* a, const B* b, Out* out, int64_t n, F f, cudaStream_t stream) {
  constexpr int V = kPackOf<Out, A, B>;
  if (n <= 0) return;
  if (packAligned<V>(a) && packAligned<V>(b) && packAligned<V>(out))
    map2Kernel<V>
        <<<mapBlocks(std::max<int64_t>(n / V, 1)), kMapThreads, 0, stream>>>(a, b, out, n, f);
  else
    map2Kernel<1><<<mapBlocks(n), kMapThreads, 0, stream>>>(a, b, out, n, f);
}

}  // namespace tandem::backend::cuda
