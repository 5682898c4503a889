// AdamW's update, one thread per element of a grid-stride loop: memory bound (16 bytes
// read and 12 written per f32 element), its math adamwStep (backend/adamw_math.h).

#include "backend/cuda/adamw_launch.h"
#include "backend/cuda/elementwise_map.cuh"

namespace tandem::backend::cuda {
namespace {

template <typename G>
__global__ void adamwKernel(float* w, const G* g, float* m, float* v, int64_t n, AdamWScalars s) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    float wi = w[i], mi = m[i], vi = v[i];
    adamwStep(wi, load(g, i), mi, vi, s);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

template <typename G>
void update(float* w, const G* g, float* m, float* v, int64_t n, const AdamWScalars& s,
            cudaStream_t stream) {
  if (n <= 0) return;
  adamwKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(w, g, m, v, n, s);
}

}  // namespace

void launchAdamWUpdate(float* w, const float* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream) {
  update(w, g, m, v, n, s, stream);
}
void launchAdamWUpdate(float* w, const uint16_t* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream) {
  update(w, g, m, v, n, s, stream);
}

}  // namespace tandem::backend::cuda
