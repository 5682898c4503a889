// The SGD update's own kernels: sgd_update's, one launch per parameter, a grid-stride loop
// moving 16 bytes of w, m and the gradient per access where the pointers allow it
// (elementwise_map.cuh); and sgd_update_group's, one launch per table of up to 48
// parameters (optimizer_plan.h). Math in optimizer_math.h.

#include <algorithm>

#include "backend/cuda/elementwise_map.cuh"
#include "backend/cuda/optimizer_launch.h"

namespace tandem::backend::cuda {
namespace {

// kMomentum: m is read and written; else it is null and never touched.
template <int V, bool kMomentum, typename G>
__global__ void sgdUpdateKernel(float* w, const G* g, float* m, int64_t n, SgdHyper h) {
  const SgdParams p = sgdParamsAt(h);
  const int64_t start = gridStart(), stride = gridStride(), packs = n / V;
  for (int64_t c = start; c < packs; c += stride) {
    Pack<float, V> pw = reinterpret_cast<const Pack<float, V>*>(w)[c];
    const Pack<G, V> pg = reinterpret_cast<const Pack<G, V>*>(g)[c];
    if constexpr (kMomentum) {
      Pack<float, V> pm = reinterpret_cast<const Pack<float, V>*>(m)[c];
#pragma unroll
      for (int k = 0; k < V; ++k) sgdStep(pw.v[k], widen(pg.v[k]), pm.v[k], p);
      reinterpret_cast<Pack<float, V>*>(m)[c] = pm;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) sgdStep(pw.v[k], widen(pg.v[k]), p);
    }
    reinterpret_cast<Pack<float, V>*>(w)[c] = pw;
  }
  for (int64_t i = packs * V + start; i < n; i += stride) {
    if constexpr (kMomentum)
      sgdStep(w[i], widen(g[i]), m[i], p);
    else
      sgdStep(w[i], widen(g[i]), p);
  }
}

template <int V, typename G>
void launchPacked(float* w, const G* g, float* m, int64_t n, const SgdHyper& p,
                  cudaStream_t stream) {
  const unsigned blocks = mapBlocks(std::max<int64_t>(n / V, 1));
  if (m != nullptr)
    sgdUpdateKernel<V, true><<<blocks, kMapThreads, 0, stream>>>(w, g, m, n, p);
  else
    sgdUpdateKernel<V, false><<<blocks, kMapThreads, 0, stream>>>(w, g, m, n, p);
}

template <typename G>
void sgdUpdate(float* w, const G* g, float* m, int64_t n, const SgdHyper& p, cudaStream_t stream) {
  // 4 values per access: 16 bytes of w and m, 16 or 8 of the gradient.
  constexpr int V = 4;
  if (n <= 0) return;
  if (packAligned<V>(w) && packAligned<V>(g) && (m == nullptr || packAligned<V>(m)))
    launchPacked<V>(w, g, m, n, p, stream);
  else
    launchPacked<1>(w, g, m, n, p, stream);
}

// Block b steps kGroupChunk values of the table's parameter that owns b, one value per
// thread and pass (coalesced; a chunk is 16 passes of 256 threads).
template <bool kMomentum, typename G>
__global__ void sgdGroupKernel(SgdGroupTable t, SgdHyper h) {
  const SgdParams p = sgdParamsAt(h);
  const int64_t block = blockIdx.x;
  const int j = groupTensorOf(t.first_block, t.count, block);
  const GroupRange r = groupRangeOf(t.first_block, t.n, j, block);
  float* w = t.w[j];
  const G* g = static_cast<const G*>(t.g[j]);
  float* m = t.m[j];
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    if constexpr (kMomentum)
      sgdStep(w[i], widen(g[i]), m[i], p);
    else
      sgdStep(w[i], widen(g[i]), p);
  }
}

template <typename G>
void sgdGroup(const SgdGroupTable& t, int64_t blocks, bool momentum, const SgdHyper& p,
              cudaStream_t stream) {
  if (t.count == 0 || blocks <= 0) return;
  const unsigned grid = static_cast<unsigned>(blocks);
  if (momentum)
    sgdGroupKernel<true, G><<<grid, kMapThreads, 0, stream>>>(t, p);
  else
    sgdGroupKernel<false, G><<<grid, kMapThreads, 0, stream>>>(t, p);
}

}  // namespace

void launchSgdUpdateGroup(const SgdGroupTable& table, int64_t blocks, bool momentum, bool bf16_grad,
                          const SgdHyper& p, cudaStream_t stream) {
  if (bf16_grad)
    sgdGroup<uint16_t>(table, blocks, momentum, p, stream);
  else
    sgdGroup<float>(table, blocks, momentum, p, stream);
}

void launchSgdUpdate(float* w, const float* g, float* m, int64_t n, const SgdHyper& p,
                     cudaStream_t stream) {
  sgdUpdate(w, g, m, n, p, stream);
}

void launchSgdUpdate(float* w, const uint16_t* g, float* m, int64_t n, const SgdHyper& p,
                     cudaStream_t stream) {
  sgdUpdate(w, g, m, n, p, stream);
}

}  // namespace tandem::backend::cuda
