#pragma once

// Fused scaled-dot-product attention on CPU, FlashAttention's scheme over oneDNN's sgemm:
// per (batch row, head), a block of queries meets a tile of keys at a time; the tile's
// scores are one small product, folded into an online softmax (running maximum and sum
// per query, the output accumulated under the same rescaling), then multiplied into the
// output by a second product. No [queries, keys] matrix is held: the scratch is a block
// times a tile, so memory is linear in the sequence length. The backward recomputes a
// tile's probabilities from each query's log-sum-exp and accumulates dq, dk and dv with
// four more products per tile (FlashAttention-2's loop order: key tiles outside).
//
// Heads are strides: q is [N, Tq, H*d] and head h reads columns h*d .. h*d+d-1 of each
// row (sgemm's leading dimension), so no transposes are made. The per-element math is
// backend/attention_math.h's (host-tested against PyTorch 2's
// F.scaled_dot_product_attention); only the order of the sums differs.

#include <cstdint>

#include "backend/attention_sizes.h"
#include "backend/dropout_mask.h"

namespace tandem::backend::cpu {


/// Dropout of the probabilities: element (h, i, j) of batch row n is the mask's element
/// (h*Tq + i)*Tk + j of sample first_sample + n (the same counters on every backend and
/// split).
struct AttentionDropout {
  bool on = false;
  DropoutMask mask{};
  int64_t first_sample = 0;
};

/// y [N, Tq, H*dv] and lse [N, H, Tq] from q, k, v.
void attentionForward(const AttentionSizes& d, const AttentionDropout& drop, const float* q,
                      const float* k, const float* v, float* y, float* lse);

/// dq, dk, dv (q's, k's, v's shapes) from dy and the forward's y and lse.
void attentionBackward(const AttentionSizes& d, const AttentionDropout& drop, const float* dy,
                       const float* q, const float* k, const float* v, const float* y,
                       const float* lse, float* dq, float* dk, float* dv);

/// One query row of one head over keys 0..keys-1 (attention_cached: a token over the KV
/// cache): out (value_depth floats) = softmax(scale q.k_j) v. The scores, their maximum and
/// exp-sum, and the weighted sum of v rows are loops the compiler vectorizes (the row math's
/// scalar dot per key made the cost of a token grow 1.5x from position 8 to 120). Rows by
/// stride: k row j at k + j * ks, v row j at v + j * vs. `scores`: scratch of `keys` floats.
void attentionSingleQuery(int64_t keys, int64_t depth, int64_t value_depth, float scale,
                          const float* q, const float* k, int64_t ks, const float* v, int64_t vs,
                          float* out, float* scores);

}  // namespace tandem::backend::cpu
