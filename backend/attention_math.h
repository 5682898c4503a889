#pragma once

// Scaled dot-product attention for one (batch, head), row by row, in the spirit of
// FlashAttention: a query row's scores are made a tile of keys at a time and folded into
// an online softmax (the running maximum m, the running sum l of exp(s - m), the output
// accumulated under the same rescaling), so no [queries, keys] matrix is ever held: the
// memory is linear in the sequence length. The forward also writes each row's
// log-sum-exp, lse = m + log(l), from which the backward recomputes any probability
// exactly as the forward saw it: P[i][j] = exp(scale q_i.k_j - lse_i).
//
// Shared by the CPU kernel and the CUDA kernel (TANDEM_HD), so that the host tests check
// the math the GPU runs. Rows are addressed through strides, so q, k and v may be views of
// a [N, T, H, d] tensor (heads as strides: no transposes).
//
// causal: query i sees keys 0..i (PyTorch's is_causal, a lower-triangular mask aligned at
// the top left). All arithmetic in f32; exp and log are the C library's (the CUDA build
// maps them to expf and logf).
//
// Dropout (AttentionRowDropout) multiplies P[i][j] by a factor F[i][j] (0, or 1 / (1 - p))
// on its way to v; the softmax's sum is of P before it.
//
// The backward, for the same rows (dO the output's gradient, D_i = dO_i . O_i, which
// still holds under dropout):
//   dP[i][j] = F[i][j] dO_i . v_j,   dS[i][j] = P[i][j] (dP[i][j] - D_i)
//   dq_i = scale sum_j dS[i][j] k_j,  dk_j = scale sum_i dS[i][j] q_i,
//   dv_j = sum_i F[i][j] P[i][j] dO_i
// dq is a query row's sum and dk, dv a key row's, each over the other side recomputed, so
// that every output is written by one thread and no atomics are needed.

#include <cmath>
#include <cstdint>

#include "backend/dropout_mask.h"
#include "backend/host_device.h"

namespace tandem::backend {

/// Keys scored at once: a tile's scores are the only per-row scratch.
inline constexpr int kAttentionKeyTile = 32;

/// A matrix of rows: element (r, c) at data[r * row_stride + c].
struct AttentionRows {
  const float* data;
  int64_t row_stride;
  TANDEM_HD const float* row(int64_t r) const { return data + r * row_stride; }
};

/// What one (batch, head) attends over.
struct AttentionShape {
  int64_t queries = 0, keys = 0;  // T_q, T_k
  int64_t depth = 0;              // d of q and k
  int64_t value_depth = 0;        // d of v and the output
  float scale = 1;                // usually 1 / sqrt(depth)
  bool causal = false;
};

/// Dropout of one (batch row, head)'s probabilities: P[i][j] is kept by the mask's
/// element base + i * keys + j of sample `sample` (base = h * Tq * Tk: attention's doc in
/// ir/ops.td), so every backend and every split of the batch draws the same masks.
/// mask null: no dropout.
struct AttentionRowDropout {
  const DropoutMask* mask = nullptr;
  uint64_t sample = 0;
  int64_t base = 0;
  /// What multiplies P[i][j] on its way to v: 1, or 1 / (1 - p) where kept and 0 where not.
  TANDEM_HD float factor(const AttentionShape& s, int64_t i, int64_t j) const {
    if (mask == nullptr) return 1.0f;
    const uint64_t e = static_cast<uint64_t>(base + i * s.keys + j);
    return mask->kept(sample, e) ? mask->scale : 0.0f;
  }
};

/// Keys query `i` sees: all of them, or 0..i when causal.
TANDEM_HD int64_t attentionKeysSeen(const AttentionShape& s, int64_t i) {
  return s.causal ? (i + 1 < s.keys ? i + 1 : s.keys) : s.keys;
}

TANDEM_HD float attentionDot(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

/// Query row i: out (value_depth floats) and its log-sum-exp. A row that sees no key
/// (causal over an empty key set) is 0 with lse -inf.
TANDEM_HD void attentionForwardRow(const AttentionShape& s, AttentionRows q, AttentionRows k,
                                   AttentionRows v, int64_t i, float* out, float* lse,
                                   AttentionRowDropout drop = {}) {
  const int64_t seen = attentionKeysSeen(s, i);
  const float* qi = q.row(i);
  float m = -INFINITY, l = 0;
  for (int64_t c = 0; c < s.value_depth; ++c) out[c] = 0;
  float scores[kAttentionKeyTile];
  for (int64_t j0 = 0; j0 < seen; j0 += kAttentionKeyTile) {
    const int64_t n = seen - j0 < kAttentionKeyTile ? seen - j0 : kAttentionKeyTile;
    float tile_max = -INFINITY;
    for (int64_t t = 0; t < n; ++t) {
      scores[t] = s.scale * attentionDot(qi, k.row(j0 + t), s.depth);
      if (scores[t] > tile_max || scores[t] != scores[t]) tile_max = scores[t];
    }
    const float m_new = tile_max > m || tile_max != tile_max ? tile_max : m;
    // exp(-inf - -inf) is NaN: a running sum that is still empty needs no rescaling.
    const float rescale = l == 0 ? 0.0f : std::exp(m - m_new);
    l *= rescale;
    for (int64_t c = 0; c < s.value_depth; ++c) out[c] *= rescale;
    for (int64_t t = 0; t < n; ++t) {
      const float p = std::exp(scores[t] - m_new);
      l += p;  // the softmax's sum is of the probabilities before dropout
      const float kept = p * drop.factor(s, i, j0 + t);
      const float* vj = v.row(j0 + t);
      for (int64_t c = 0; c < s.value_depth; ++c) out[c] += kept * vj[c];
    }
    m = m_new;
  }
  if (seen == 0) {
    *lse = -INFINITY;
    return;
  }
  const float inv = 1.0f / l;
  for (int64_t c = 0; c < s.value_depth; ++c) out[c] *= inv;
  *lse = m + std::log(l);
}

/// P[i][j] as the forward saw it, from query i's log-sum-exp.
TANDEM_HD float attentionProbability(const AttentionShape& s, AttentionRows q, AttentionRows k,
                                     const float* lse, int64_t i, int64_t j) {
  return std::exp(s.scale * attentionDot(q.row(i), k.row(j), s.depth) - lse[i]);
}

/// D_i = dO_i . O_i, for every query row, before the two backward sweeps.
TANDEM_HD float attentionRowDelta(const AttentionShape& s, AttentionRows d_out, AttentionRows out,
                                  int64_t i) {
  return attentionDot(d_out.row(i), out.row(i), s.value_depth);
}

/// dq_i (depth floats) for query row i; `delta` holds every row's D.
TANDEM_HD void attentionBackwardQueryRow(const AttentionShape& s, AttentionRows q, AttentionRows k,
                                         AttentionRows v, AttentionRows d_out, const float* lse,
                                         const float* delta, int64_t i, float* dq,
                                         AttentionRowDropout drop = {}) {
  for (int64_t c = 0; c < s.depth; ++c) dq[c] = 0;
  const int64_t seen = attentionKeysSeen(s, i);
  for (int64_t j = 0; j < seen; ++j) {
    const float p = attentionProbability(s, q, k, lse, i, j);
    const float dp = attentionDot(d_out.row(i), v.row(j), s.value_depth) * drop.factor(s, i, j);
    const float ds = p * (dp - delta[i]);
    const float* kj = k.row(j);
    for (int64_t c = 0; c < s.depth; ++c) dq[c] += ds * kj[c];
  }
  for (int64_t c = 0; c < s.depth; ++c) dq[c] *= s.scale;
}

/// dk_j (depth floats) and dv_j (value_depth floats) for key row j, over the queries that
/// see it.
TANDEM_HD void attentionBackwardKeyRow(const AttentionShape& s, AttentionRows q, AttentionRows k,
                                       AttentionRows v, AttentionRows d_out, const float* lse,
                                       const float* delta, int64_t j, float* dk, float* dv,
                                       AttentionRowDropout drop = {}) {
  for (int64_t c = 0; c < s.depth; ++c) dk[c] = 0;
  for (int64_t c = 0; c < s.value_depth; ++c) dv[c] = 0;
  for (int64_t i = s.causal ? j : 0; i < s.queries; ++i) {
    const float p = attentionProbability(s, q, k, lse, i, j);
    const float* doi = d_out.row(i);
    const float f = drop.factor(s, i, j);
    const float ds = p * (attentionDot(doi, v.row(j), s.value_depth) * f - delta[i]);
    const float* qi = q.row(i);
    const float kept = p * f;
    for (int64_t c = 0; c < s.depth; ++c) dk[c] += ds * qi[c];
    for (int64_t c = 0; c < s.value_depth; ++c) dv[c] += kept * doi[c];
  }
  for (int64_t c = 0; c < s.depth; ++c) dk[c] *= s.scale;
}

}  // namespace tandem::backend
