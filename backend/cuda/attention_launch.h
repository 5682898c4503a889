#pragma once

// attention's own kernels (attention.cu), enqueued on `stream`; callers check
// cudaGetLastError. The per-thread math is backend/attention_math.h's row functions, which
// the host tests run against PyTorch 2's F.scaled_dot_product_attention and against the
// CPU kernel: one thread per query row (forward, dq), one per key row (dk, dv), so every
// output is written by one thread and nothing is added atomically.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/attention_sizes.h"
#include "backend/dropout_mask.h"

namespace tandem::backend::cuda {

/// What one launch covers: q [N, Tq, H*d], k [N, Tk, H*d], v [N, Tk, H*dv].
struct AttentionLaunch : AttentionSizes {
  /// Dropout: `step` (device memory, @step's replica, read by the kernel; null: none) and
  /// the mask's constants (its step ignored); rows from `first_sample` of the whole batch.
  const int32_t* step = nullptr;
  DropoutMask mask{};
  int64_t first_sample = 0;
  /// attention_cached: k and v are a cache of `keys` rows per batch row, of which the
  /// first position[0] + 1 are seen (`position` in device memory, read by the kernel).
  const int32_t* position = nullptr;
};

/// y [N, Tq, H*dv] and lse [N, H, Tq].
void launchAttention(const AttentionLaunch& a, const float* q, const float* k, const float* v,
                     float* y, float* lse, cudaStream_t stream);

/// dq, dk, dv from dy, the forward's y and lse; `delta` is f32[N, H, Tq] of scratch.
void launchAttentionBackward(const AttentionLaunch& a, const float* dy, const float* q,
                             const float* k, const float* v, const float* y, const float* lse,
                             float* delta, float* dq, float* dk, float* dv, cudaStream_t stream);

/// kv_write: row position[0] (device memory) of each batch row of `cache` [batch, rows,
/// width] from x [batch, 1, width], in place, then y = the cache. A position outside the
/// cache writes nothing (the kernel cannot stop; the host checks positions before a step).
/// Returns the copy's cudaMemcpyAsync code.
cudaError_t launchKvWrite(float* cache, const float* x, const int32_t* position, int64_t batch,
                          int64_t rows, int64_t width, float* y, cudaStream_t stream);

}  // namespace tandem::backend::cuda
