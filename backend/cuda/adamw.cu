// AdamW's update, one thread per element of a grid-stride loop: memory bound (16 bytes
// read and 12 written per f32 element), its math adamwStep (backend/adamw_math.h); and
// adamw_update_group's multi-tensor form, one launch per table of up to 48 parameters.

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

// adamw_update_group's kernel: block b steps kGroupChunk values of the table's parameter
// that owns b (optimizer_plan.h), with the scalars of that parameter's count, made once
// per block as adamwCountedKernel makes them.
template <typename G>
__global__ void adamwGroupKernel(AdamwGroupTable t, AdamWHyper h, const float* lr_factor) {
  const int64_t block = blockIdx.x;
  const int j = groupTensorOf(t.first_block, t.count, block);
  const GroupRange r = groupRangeOf(t.first_block, t.n, j, block);
  __shared__ AdamWScalars s;
  if (threadIdx.x == 0) s = adamwScalarsAt(h, lr_factor, *t.step[j]);
  __syncthreads();
  float* w = t.w[j];
  const G* g = static_cast<const G*>(t.g[j]);
  float* m = t.m[j];
  float* v = t.v[j];
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    float wi = w[i], mi = m[i], vi = v[i];
    adamwStep(wi, load(g, i), mi, vi, s);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

// Each of the table's counts up by one, after every block of the update has read it.
__global__ void countGroupSteps(AdamwGroupTable t) {
  if (static_cast<int>(threadIdx.x) < t.count) *t.step[threadIdx.x] += 1;
}

template <typename G>
void groupUpdate(const AdamwGroupTable& t, int64_t blocks, const AdamWHyper& h,
                 const float* lr_factor, cudaStream_t stream) {
  if (t.count == 0) return;
  if (blocks > 0)
    adamwGroupKernel<G><<<static_cast<unsigned>(blocks), kMapThreads, 0, stream>>>(t, h,
                                                                                   lr_factor);
  countGroupSteps<<<1, kGroupTensorsPerLaunch, 0, stream>>>(t);
}

}  // namespace

void launchAdamWUpdateGroup(const AdamwGroupTable& table, int64_t blocks, bool bf16_grad,
                            const AdamWHyper& h, const float* lr_factor, cudaStream_t stream) {
  if (bf16_grad)
    groupUpdate<uint16_t>(table, blocks, h, lr_factor, stream);
  else
    groupUpdate<float>(table, blocks, h, lr_factor, stream);
}

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
