// attention's own kernels: one thread per query row (the forward, dq) or key row (dk,
// dv) over a grid-stride loop (elementwise_map.cuh), each running the row functions of
// backend/attention_math.h that the host tests check. Heads are strides: a thread reads
// its head's columns of the [N, T, H*d] rows in place.

#include "backend/attention_math.h"
#include "backend/cuda/attention_launch.h"
#include "backend/cuda/elementwise_map.cuh"

namespace tandem::backend::cuda {
namespace {

__device__ AttentionShape shapeOf(const AttentionLaunch& a) {
  return AttentionShape{.queries = a.queries,
                        .keys = a.keys,
                        .depth = a.depth,
                        .value_depth = a.value_depth,
                        .scale = a.scale,
                        .causal = a.causal};
}

/// Row r of head h of batch row n in a [N, tokens, H * width] tensor.
__device__ int64_t rowAt(const AttentionLaunch& a, int64_t n, int64_t h, int64_t tokens,
                         int64_t width, int64_t r) {
  return (n * tokens * a.heads + h) * width + r * a.heads * width;
}

__device__ AttentionRows rowsOf(const AttentionLaunch& a, const float* x, int64_t n, int64_t h,
                                int64_t tokens, int64_t width) {
  return AttentionRows{x + rowAt(a, n, h, tokens, width, 0), a.heads * width};
}

/// The operands of one (batch row, head) and its dropout, at the step @step holds now.
struct Head {
  int64_t n, h, pair;
  AttentionShape s;
  AttentionRows q, k, v;
  AttentionRowDropout drop;
};

__device__ Head headOf(const AttentionLaunch& a, const DropoutMask* mask, int64_t pair,
                       const float* q, const float* k, const float* v) {
  const int64_t n = pair / a.heads, h = pair % a.heads;
  return Head{.n = n,
              .h = h,
              .pair = pair,
              .s = shapeOf(a),
              .q = rowsOf(a, q, n, h, a.queries, a.depth),
              .k = rowsOf(a, k, n, h, a.keys, a.depth),
              .v = rowsOf(a, v, n, h, a.keys, a.value_depth),
              .drop = AttentionRowDropout{.mask = a.step != nullptr ? mask : nullptr,
                                          .sample = static_cast<uint64_t>(a.first_sample + n),
                                          .base = h * a.queries * a.keys}};
}

/// The keys a query sees: all the rows, or a cache's first position + 1.
__device__ AttentionShape seenShape(const AttentionLaunch& a) {
  AttentionShape s = shapeOf(a);
  if (a.position != nullptr) {
    const int64_t p = *a.position;
    s.keys = p < 0 ? 0 : p + 1 < a.keys ? p + 1 : a.keys;
  }
  return s;
}

__device__ DropoutMask maskOf(const AttentionLaunch& a) {
  return a.step != nullptr ? a.mask.atStep(a.step) : a.mask;
}

__global__ void forwardKernel(AttentionLaunch a, const float* q, const float* k, const float* v,
                              float* y, float* lse) {
  const DropoutMask mask = maskOf(a);
  for (int64_t t = gridStart(); t < a.batch * a.heads * a.queries; t += gridStride()) {
    const Head hd = headOf(a, &mask, t / a.queries, q, k, v);
    const int64_t i = t % a.queries;
    attentionForwardRow(seenShape(a), hd.q, hd.k, hd.v, i,
                        y + rowAt(a, hd.n, hd.h, a.queries, a.value_depth, i), lse + t, hd.drop);
  }
}

__global__ void deltaKernel(AttentionLaunch a, const float* dy, const float* y, float* delta) {
  for (int64_t t = gridStart(); t < a.batch * a.heads * a.queries; t += gridStride()) {
    const int64_t pair = t / a.queries, n = pair / a.heads, h = pair % a.heads;
    delta[t] = attentionRowDelta(shapeOf(a), rowsOf(a, dy, n, h, a.queries, a.value_depth),
                                 rowsOf(a, y, n, h, a.queries, a.value_depth), t % a.queries);
  }
}

__global__ void queryKernel(AttentionLaunch a, const float* dy, const float* q, const float* k,
                            const float* v, const float* lse, const float* delta, float* dq) {
  const DropoutMask mask = maskOf(a);
  for (int64_t t = gridStart(); t < a.batch * a.heads * a.queries; t += gridStride()) {
    const Head hd = headOf(a, &mask, t / a.queries, q, k, v);
    const int64_t i = t % a.queries, first = hd.pair * a.queries;
    attentionBackwardQueryRow(
        hd.s, hd.q, hd.k, hd.v, rowsOf(a, dy, hd.n, hd.h, a.queries, a.value_depth), lse + first,
        delta + first, i, dq + rowAt(a, hd.n, hd.h, a.queries, a.depth, i), hd.drop);
  }
}

__global__ void keyKernel(AttentionLaunch a, const float* dy, const float* q, const float* k,
                          const float* v, const float* lse, const float* delta, float* dk,
                          float* dv) {
  const DropoutMask mask = maskOf(a);
  for (int64_t t = gridStart(); t < a.batch * a.heads * a.keys; t += gridStride()) {
    const Head hd = headOf(a, &mask, t / a.keys, q, k, v);
    const int64_t j = t % a.keys, first = hd.pair * a.queries;
    attentionBackwardKeyRow(hd.s, hd.q, hd.k, hd.v,
                            rowsOf(a, dy, hd.n, hd.h, a.queries, a.value_depth), lse + first,
                            delta + first, j, dk + rowAt(a, hd.n, hd.h, a.keys, a.depth, j),
                            dv + rowAt(a, hd.n, hd.h, a.keys, a.value_depth, j), hd.drop);
  }
}

__global__ void kvWriteKernel(float* cache, const float* x, const int32_t* position, int64_t batch,
                              int64_t rows, int64_t width) {
  const int64_t p = *position;
  if (p < 0 || p >= rows) return;
  for (int64_t t = gridStart(); t < batch * width; t += gridStride()) {
    const int64_t n = t / width, c = t % width;
    cache[(n * rows + p) * width + c] = x[t];
  }
}

}  // namespace

cudaError_t launchKvWrite(float* cache, const float* x, const int32_t* position, int64_t batch,
                          int64_t rows, int64_t width, float* y, cudaStream_t stream) {
  if (batch * width > 0)
    kvWriteKernel<<<mapBlocks(batch * width), kMapThreads, 0, stream>>>(cache, x, position, batch,
                                                                        rows, width);
  // The cache so written, in stream order after the row.
  return cudaMemcpyAsync(y, cache, static_cast<size_t>(batch * rows * width) * sizeof(float),
                         cudaMemcpyDeviceToDevice, stream);
}

void launchAttention(const AttentionLaunch& a, const float* q, const float* k, const float* v,
                     float* y, float* lse, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads * a.queries;
  if (rows <= 0) return;
  forwardKernel<<<mapBlocks(rows), kMapThreads, 0, stream>>>(a, q, k, v, y, lse);
}

void launchAttentionBackward(const AttentionLaunch& a, const float* dy, const float* q,
                             const float* k, const float* v, const float* y, const float* lse,
                             float* delta, float* dq, float* dk, float* dv, cudaStream_t stream) {
  const int64_t queries = a.batch * a.heads * a.queries, keys = a.batch * a.heads * a.keys;
  if (queries > 0) {
    deltaKernel<<<mapBlocks(queries), kMapThreads, 0, stream>>>(a, dy, y, delta);
    queryKernel<<<mapBlocks(queries), kMapThreads, 0, stream>>>(a, dy, q, k, v, lse, delta, dq);
  }
  if (keys > 0)
    keyKernel<<<mapBlocks(keys), kMapThreads, 0, stream>>>(a, dy, q, k, v, lse, delta, dk, dv);
}

}  // namespace tandem::backend::cuda
