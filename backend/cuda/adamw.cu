// AdamW's update, one thread per element of a grid-stride loop: memory bound (16 bytes
// read and 12 written per f32 element), its math adamwStep (backend/adamw_math.h).

#include "backend/cuda/adamw_launch.h"
#include "backend/cuda/elementwise_map.cuh"

namespace tandem::backend::cuda {
namespace {

// This thread's elements of the grid-stride loop.
template <typename G>
__device__ __forceinline__ void adamwElements(float* w, const G* g, float* m, float* v, int64_t n,
                                              const AdamWScalars& s) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    float wi = w[i], mi = m[i], vi = v[i];
    adamwStep(wi, load(g, i), mi, vi, s);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

template <typename G>
__global__ void adamwKernel(float* w, const G* g, float* m, float* v, int64_t n, AdamWScalars s) {
  adamwElements(w, g, m, v, n, s);
}

template <typename G>
void update(float* w, const G* g, float* m, float* v, int64_t n, const AdamWScalars& s,
            cudaStream_t stream) {
  if (n <= 0) return;
  adamwKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(w, g, m, v, n, s);
}

// adamw_update's kernel: the scalars come from the step count in device memory (the
// update's number is *step + 1), made once per block in double (adamwScalars) so that the
// host never waits for the count.
template <typename G>
__global__ void adamwCountedKernel(float* w, const G* g, float* m, float* v, int64_t n,
                                   const float* step, AdamWHyper h, const float* lr_factor) {
  __shared__ AdamWScalars s;
  if (threadIdx.x == 0) s = adamwScalarsAt(h, lr_factor, *step);
  __syncthreads();
  adamwElements(w, g, m, v, n, s);
}

// The count goes up after every block has read it: a kernel of its own, which the stream
// runs after the update.
__global__ void countStep(float* step) { *step += 1; }

template <typename G>
void countedUpdate(float* w, const G* g, float* m, float* v, int64_t n, float* step,
                   const AdamWHyper& h, const float* lr_factor, cudaStream_t stream) {
  if (n > 0)
    adamwCountedKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(w, g, m, v, n, step, h,
                                                                 lr_factor);
  countStep<<<1, 1, 0, stream>>>(step);
}

}  // namespace

void launchAdamWUpdate(float* w, const float* g, float* m, float* v, int64_t n, float* step,
                       const AdamWHyper& h, const float* lr_factor, cudaStream_t stream) {
  countedUpdate(w, g, m, v, n, step, h, lr_factor, stream);
}
void launchAdamWUpdate(float* w, const uint16_t* g, float* m, float* v, int64_t n, float* step,
                       const AdamWHyper& h, const float* lr_factor, cudaStream_t stream) {
  countedUpdate(w, g, m, v, n, step, h, lr_factor, stream);
}

void launchAdamWUpdate(float* w, const float* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream) {
  update(w, g, m, v, n, s, stream);
}
void launchAdamWUpdate(float* w, const uint16_t* g, float* m, float* v, int64_t n,
                       const AdamWScalars& s, cudaStream_t stream) {
  update(w, g, m, v, n, s, stream);
}

}  // namespace tandem::backend::cuda
