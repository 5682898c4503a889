#include "backend/cpu/attention_core.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/dropout_core.h"
#include "backend/cpu/vector_loops.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {
namespace {

/// Queries a block and keys a tile: a 64x64 tile of scores (16 KiB) stays in L1 with the
/// operands' rows it is made from.
constexpr int64_t kBlock = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Row-major C = alpha op(A) op(B) + beta C (dnnl::sgemm throws dnnl::error on bad
/// arguments; CpuKernel::launch turns that into the node's error).
void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// exp(x) for the probabilities, Cephes' expf in a form that vectorizes (x = n ln2 + r, a
// degree-6 polynomial for e^r, 2^n from the exponent bits), within 2 ulp. Why our own:
// std::exp does not vectorize without -ffast-math, oneDNN's eltwise exp is a primitive per
// shape that cannot subtract each row's own maximum in the same pass, and this loop is
// half of attention's time otherwise.
/// c ? a : b as bit masks: GCC if-converts and vectorizes these where its float selects
/// stay branches (AVX-512's masked moves are refused under -ftrapping-math).
inline float pick(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

inline float expOf(float x) {
  constexpr float kLow = -87.3365478515625f, kHigh = 88.3762626647949f;  // e^x normal, finite
  const bool nan = x != x;
  float c = pick(x < kLow, kLow, x);
  c = pick(c > kHigh, kHigh, c);
  c = pick(nan, 0.0f, c);
  const float fx = c * 1.44269504088896341f;  // log2(e)
  const int32_t n = static_cast<int32_t>(fx + std::copysign(0.5f, fx));
  const float nf = static_cast<float>(n);
  float r = c - nf * 0.693359375f;  // ln 2 in two parts, the first exact in f32
  r = r - nf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const float y = e * std::bit_cast<float>((n + 127) << 23);
  return pick(nan, x, pick(x < kLow, 0.0f, y));
}

/// y[t] = exp(x[t] - shift) for t < n (x and y may alias).
TANDEM_VECTOR_LOOPS void expShifted(const float* x, float shift, int64_t n, float* y) {
  for (int64_t t = 0; t < n; ++t) y[t] = expOf(x[t] - shift);
}

TANDEM_VECTOR_LOOPS void scaleRow(float* x, float s, int64_t n) {
  for (int64_t t = 0; t < n; ++t) x[t] *= s;
}

TANDEM_VECTOR_LOOPS void multiplyRow(float* x, const float* f, int64_t n) {
  for (int64_t t = 0; t < n; ++t) x[t] *= f[t];
}

/// ds[t] = p[t] * (dp[t] - delta).
TANDEM_VECTOR_LOOPS void softmaxGradRow(const float* p, const float* dp, float delta, int64_t n,
                                        float* ds) {
  for (int64_t t = 0; t < n; ++t) ds[t] = p[t] * (dp[t] - delta);
}

// A row's sum over 16 lanes, then across them: the loop vectorizes (a float sum does not,
// without reassociation), and the order is fixed by the row's length alone.
constexpr int kLanes = 16;

/// v's bits as an int whose order is the floats' (negative ones' magnitude bits flipped),
/// NaN above everything: the row's maximum is then an integer max, which vectorizes where
/// a float max with PyTorch's NaN rule does not. The map is its own inverse.
inline int32_t orderedKey(float v) {
  const int32_t i = std::bit_cast<int32_t>(v);
  const int32_t key = i ^ ((i >> 31) & 0x7fffffff);
  return (i & 0x7fffffff) > 0x7f800000 ? INT32_MAX : key;
}

/// The row's largest value; NaN when it holds one (as PyTorch's softmax makes such a row).
TANDEM_VECTOR_LOOPS float rowMax(const float* x, int64_t n) {
  if (n <= 0) return kNegInf;
  int32_t m = INT32_MIN;
  for (int64_t t = 0; t < n; ++t) m = std::max(m, orderedKey(x[t]));
  if (m == INT32_MAX) return std::numeric_limits<float>::quiet_NaN();
  return std::bit_cast<float>(m ^ ((m >> 31) & 0x7fffffff));
}

/// y[t] = exp(x[t] - shift) for t < n (x and y may be one row); returns their sum.
TANDEM_VECTOR_LOOPS float expShiftedSum(const float* x, float shift, int64_t n, float* y) {
  float lanes[kLanes] = {};
  int64_t t = 0;
  for (; t + kLanes <= n; t += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      y[t + l] = expOf(x[t + l] - shift);
      lanes[l] += y[t + l];
    }
  float sum = 0;
  for (; t < n; ++t) {
    y[t] = expOf(x[t] - shift);
    sum += y[t];
  }
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

/// a . b over kLanes partial sums (vectorized; a fixed order for a given n).
TANDEM_VECTOR_LOOPS float laneDot(const float* a, const float* b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t t = 0;
  for (; t + kLanes <= n; t += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[t + l] * b[t + l];
  float sum = 0;
  for (; t < n; ++t) sum += a[t] * b[t];
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

/// y[t] += a * x[t].
TANDEM_VECTOR_LOOPS void axpy(float a, const float* x, int64_t n, float* y) {
  for (int64_t t = 0; t < n; ++t) y[t] += a * x[t];
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t t = 0; t < n; ++t) s += a[t] * b[t];
  return s;
}

/// Keys query i sees among the tile [j0, j0 + n): its first `seen` (0 when none).
int64_t keysSeen(const AttentionSizes& d, int64_t i, int64_t j0, int64_t n) {
  if (!d.causal) return n;
  return std::clamp<int64_t>(i + 1 - j0, 0, n);
}

/// True when every value of `rows` rows of `cols` (row stride `stride`) is finite: an OR
/// over the rows of "all exponent bits set" (NaN or inf), branch-free so that it vectorizes
/// (it runs on every diagonal tile: a loop of isfinite with an early exit cost 3-5 % of
/// the forward).
TANDEM_VECTOR_LOOPS bool rowsFinite(const float* a, int64_t rows, int64_t cols, int64_t stride) {
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t special = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + r * stride;
    for (int64_t c = 0; c < cols; ++c)
      special |= (std::bit_cast<uint32_t>(row[c]) & kExponent) == kExponent;
  }
  return special == 0;
}

/// A causal tile some of whose rows do not see all its keys (the diagonal's). Its products
/// multiply the masked entries' zeros by the other operand, which is exact while that is
/// finite; a NaN or inf there (a future key's value, a query row of NaN) would make 0 * inf
/// = NaN where the definition does not read it. Such tiles with non-finite operand rows
/// take the loops below, over the entries each row sees, instead of the product.
bool partlyMasked(const AttentionSizes& d, int64_t i0, int64_t j0, int64_t bk) {
  return d.causal && j0 + bk > i0 + 1;
}

/// The products of a partly masked tile over the entries each row sees only: w [bq, bk]
/// (row stride kBlock) times x. Not transposed: out[r] += alpha * sum_j w[r][j] x[j] (x and
/// out of key rows and query rows); transposed: out[j] += alpha * sum_r w[r][j] x[r] (x of
/// query rows, out of key rows). Rows of x and out are n wide, strides xs and os.
void maskedProduct(const AttentionSizes& d, int64_t i0, int64_t j0, int64_t bq, int64_t bk,
                   bool transposed, float alpha, const float* w, const float* x, int64_t xs,
                   int64_t n, float* out, int64_t os) {
  for (int64_t r = 0; r < bq; ++r)
    for (int64_t j = 0; j < keysSeen(d, i0 + r, j0, bk); ++j) {
      const float* from = x + (transposed ? r : j) * xs;
      float* to = out + (transposed ? j : r) * os;
      for (int64_t c = 0; c < n; ++c) to[c] += alpha * w[r * kBlock + j] * from[c];
    }
}

/// Where one (batch row, head) lies: every operand's rows by stride, each head's columns
/// at its offset.
struct HeadView {
  const float *q, *k, *v;
  int64_t qs, ks, vs;  // row strides: H*d for q and k, H*dv for v, y and their gradients
  uint64_t sample;     // the row's index in the whole batch (dropout's counter)
  int64_t mask_base;   // element (i, j) of the mask is mask_base + i * keys + j
};

HeadView headView(const AttentionSizes& d, const AttentionDropout& drop, const float* q,
                  const float* k, const float* v, int64_t n, int64_t h) {
  const int64_t qs = d.heads * d.depth, vs = d.heads * d.value_depth;
  const int64_t key_rows = d.key_rows > 0 ? d.key_rows : d.keys;
  return HeadView{.q = q + n * d.queries * qs + h * d.depth,
                  .k = k + n * key_rows * qs + h * d.depth,
                  .v = v + n * key_rows * vs + h * d.value_depth,
                  .qs = qs,
                  .ks = qs,
                  .vs = vs,
                  .sample = static_cast<uint64_t>(drop.first_sample + n),
                  .mask_base = h * d.queries * d.keys};
}

/// The dropout factors of one row of a tile: 1 / (1 - p) where kept, else 0.
class KeepFactors {
 public:
  void fill(const AttentionDropout& drop, uint64_t sample, int64_t element, int64_t n,
            float* factor) {
    constexpr int64_t kPerBlock = DropoutMask::kPerBlock;
    const int64_t first = element / kPerBlock, last = (element + n - 1) / kPerBlock;
    dropoutDraws(drop.mask, sample, first, last - first + 1, draws_);
    const uint16_t* d = draws_ + element % kPerBlock;
    for (int64_t t = 0; t < n; ++t) factor[t] = drop.mask.keeps(d[t]) ? drop.mask.scale : 0.0f;
  }

 private:
  uint16_t draws_[kBlock + 2 * DropoutMask::kPerBlock];
};

/// The forward of one (batch row, head): its rows of y and lse.
void forwardHead(const AttentionSizes& d, const AttentionDropout& drop, const HeadView& hv, float* y,
                 int64_t ys, float* lse, std::vector<float>& scratch) {
  const int64_t dv = d.value_depth;
  scratch.resize(kBlock * kBlock + kBlock * dv + 3 * kBlock);
  float* s = scratch.data();       // a tile's scores, then probabilities [kBlock, kBlock]
  float* o = s + kBlock * kBlock;  // the block's output accumulator [kBlock, dv]
  float* m = o + kBlock * dv;      // running maximum per query
  float* l = m + kBlock;           // running sum per query
  float* factor = l + kBlock;      // one row's dropout factors
  KeepFactors keep;
  for (int64_t i0 = 0; i0 < d.queries; i0 += kBlock) {
    const int64_t bq = std::min(kBlock, d.queries - i0);
    std::fill(o, o + bq * dv, 0.0f);
    std::fill(m, m + bq, kNegInf);
    std::fill(l, l + bq, 0.0f);
    const int64_t key_end = d.causal ? std::min(d.keys, i0 + bq) : d.keys;
    for (int64_t j0 = 0; j0 < key_end; j0 += kBlock) {
      const int64_t bk = std::min(kBlock, key_end - j0);
      gemm('N', 'T', bq, bk, d.depth, d.scale, hv.q + i0 * hv.qs, hv.qs, hv.k + j0 * hv.ks, hv.ks,
           0.0f, s, kBlock);
      for (int64_t r = 0; r < bq; ++r) {
        float* row = s + r * kBlock;
        const int64_t seen = keysSeen(d, i0 + r, j0, bk);
        if (seen > 0) {
          const float tile_max = rowMax(row, seen);
          const float m_new = tile_max > m[r] || tile_max != tile_max ? tile_max : m[r];
          // exp(-inf - -inf) is NaN: a running sum that is still empty needs no rescaling.
          const float rescale = l[r] == 0 ? 0.0f : std::exp(m[r] - m_new);
          l[r] = l[r] * rescale + expShiftedSum(row, m_new, seen, row);
          if (rescale != 1.0f) scaleRow(o + r * dv, rescale, dv);
          m[r] = m_new;
          if (drop.on) {
            keep.fill(drop, hv.sample, hv.mask_base + (i0 + r) * d.keys + j0, seen, factor);
            multiplyRow(row, factor, seen);
          }
        }
        std::fill(row + std::max<int64_t>(seen, 0), row + bk, 0.0f);  // masked keys
      }
      if (partlyMasked(d, i0, j0, bk) && !rowsFinite(hv.v + j0 * hv.vs, bk, dv, hv.vs))
        maskedProduct(d, i0, j0, bq, bk, false, 1.0f, s, hv.v + j0 * hv.vs, hv.vs, dv, o, dv);
      else
        gemm('N', 'N', bq, dv, bk, 1.0f, s, kBlock, hv.v + j0 * hv.vs, hv.vs, 1.0f, o, dv);
    }
    for (int64_t r = 0; r < bq; ++r) {
      float* out = y + (i0 + r) * ys;
      if (l[r] == 0) {  // no key seen: 0, as the row math says
        std::fill(out, out + dv, 0.0f);
        lse[i0 + r] = kNegInf;
        continue;
      }
      const float inv = 1.0f / l[r];
      for (int64_t c = 0; c < dv; ++c) out[c] = o[r * dv + c] * inv;
      lse[i0 + r] = m[r] + std::log(l[r]);
    }
  }
}

/// The backward of one (batch row, head): its columns of dq, dk and dv (zeroed first).
void backwardHead(const AttentionSizes& d, const AttentionDropout& drop, const HeadView& hv,
                  const float* dy, const float* y, int64_t ys, const float* lse, float* dq,
                  float* dk, float* dv, std::vector<float>& scratch) {
  const int64_t dd = d.depth, dvd = d.value_depth;
  scratch.resize(3 * kBlock * kBlock + d.queries + kBlock);
  float* p = scratch.data();            // probabilities of a block x tile
  float* pd = p + kBlock * kBlock;      // the same after dropout (what multiplied v)
  float* ds = pd + kBlock * kBlock;     // dP, then dS
  float* delta = ds + kBlock * kBlock;  // D_i = dO_i . O_i per query
  float* factor = delta + d.queries;
  KeepFactors keep;
  for (int64_t i = 0; i < d.queries; ++i) {
    delta[i] = dot(dy + i * ys, y + i * ys, dvd);
    std::fill(dq + i * hv.qs, dq + i * hv.qs + dd, 0.0f);
  }
  for (int64_t j = 0; j < d.keys; ++j) {
    std::fill(dk + j * hv.ks, dk + j * hv.ks + dd, 0.0f);
    std::fill(dv + j * hv.vs, dv + j * hv.vs + dvd, 0.0f);
  }
  for (int64_t j0 = 0; j0 < d.keys; j0 += kBlock) {
    const int64_t bk = std::min(kBlock, d.keys - j0);
    // Causal: the query blocks before the tile see none of it.
    for (int64_t i0 = d.causal ? j0 / kBlock * kBlock : 0; i0 < d.queries; i0 += kBlock) {
      const int64_t bq = std::min(kBlock, d.queries - i0);
      gemm('N', 'T', bq, bk, dd, d.scale, hv.q + i0 * hv.qs, hv.qs, hv.k + j0 * hv.ks, hv.ks, 0.0f,
           p, kBlock);
      for (int64_t r = 0; r < bq; ++r) {
        float* row = p + r * kBlock;
        const int64_t seen = keysSeen(d, i0 + r, j0, bk);
        if (seen > 0) expShifted(row, lse[i0 + r], seen, row);
        std::fill(row + std::max<int64_t>(seen, 0), row + bk, 0.0f);
        float* drow = pd + r * kBlock;
        std::copy(row, row + bk, drow);
        if (drop.on && seen > 0) {
          keep.fill(drop, hv.sample, hv.mask_base + (i0 + r) * d.keys + j0, seen, factor);
          multiplyRow(drow, factor, seen);
        }
      }
      const float* dy_block = dy + i0 * ys;
      const float* q_block = hv.q + i0 * hv.qs;
      const float* k_tile = hv.k + j0 * hv.ks;
      const bool masked = partlyMasked(d, i0, j0, bk);
      if (masked && !rowsFinite(dy_block, bq, dvd, ys))
        maskedProduct(d, i0, j0, bq, bk, true, 1.0f, pd, dy_block, ys, dvd, dv + j0 * hv.vs, hv.vs);
      else
        gemm('T', 'N', bk, dvd, bq, 1.0f, pd, kBlock, dy_block, ys, 1.0f, dv + j0 * hv.vs, hv.vs);
      gemm('N', 'T', bq, bk, dvd, 1.0f, dy_block, ys, hv.v + j0 * hv.vs, hv.vs, 0.0f, ds, kBlock);
      for (int64_t r = 0; r < bq; ++r) {
        float* drow = ds + r * kBlock;
        const int64_t seen = keysSeen(d, i0 + r, j0, bk);
        if (drop.on && seen > 0) {  // the mask again (same counters): what reached v
          keep.fill(drop, hv.sample, hv.mask_base + (i0 + r) * d.keys + j0, seen, factor);
          multiplyRow(drow, factor, seen);
        }
        // Masked keys' dS is 0, not 0 * (dP - D): dP is NaN there for a row of dy holding one.
        softmaxGradRow(p + r * kBlock, drow, delta[i0 + r], std::max<int64_t>(seen, 0), drow);
        std::fill(drow + std::max<int64_t>(seen, 0), drow + bk, 0.0f);
      }
      if (masked && !rowsFinite(q_block, bq, dd, hv.qs))
        maskedProduct(d, i0, j0, bq, bk, true, d.scale, ds, q_block, hv.qs, dd, dk + j0 * hv.ks,
                           hv.ks);
      else
        gemm('T', 'N', bk, dd, bq, d.scale, ds, kBlock, q_block, hv.qs, 1.0f, dk + j0 * hv.ks,
             hv.ks);
      if (masked && !rowsFinite(k_tile, bk, dd, hv.ks))
        maskedProduct(d, i0, j0, bq, bk, false, d.scale, ds, k_tile, hv.ks, dd, dq + i0 * hv.qs, hv.qs);
      else
        gemm('N', 'N', bq, dd, bk, d.scale, ds, kBlock, k_tile, hv.ks, 1.0f, dq + i0 * hv.qs,
             hv.qs);
    }
  }
}

}  // namespace

void attentionSingleQuery(int64_t keys, int64_t depth, int64_t value_depth, float scale,
                          const float* q, const float* k, int64_t ks, const float* v, int64_t vs,
                          float* out, float* scores) {
  for (int64_t j = 0; j < keys; ++j) scores[j] = scale * laneDot(q, k + j * ks, depth);
  const float m = rowMax(scores, keys);
  const float l = expShiftedSum(scores, m, keys, scores);  // NaN for a row of +inf or NaN
  std::fill(out, out + value_depth, 0.0f);
  for (int64_t j = 0; j < keys; ++j) axpy(scores[j], v + j * vs, value_depth, out);
  scaleRow(out, 1.0f / l, value_depth);
}

void attentionForward(const AttentionSizes& d, const AttentionDropout& drop, const float* q,
                      const float* k, const float* v, float* y, float* lse) {
  const int64_t pairs = d.batch * d.heads, ys = d.heads * d.value_depth;
#pragma omp parallel
  {
    std::vector<float> scratch;
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t n = pair / d.heads, h = pair % d.heads;
      forwardHead(d, drop, headView(d, drop, q, k, v, n, h),
                  y + n * d.queries * ys + h * d.value_depth, ys, lse + pair * d.queries, scratch);
    }
  }
}

void attentionBackward(const AttentionSizes& d, const AttentionDropout& drop, const float* dy,
                       const float* q, const float* k, const float* v, const float* y,
                       const float* lse, float* dq, float* dk, float* dv) {
  const int64_t pairs = d.batch * d.heads, ys = d.heads * d.value_depth;
  const int64_t qs = d.heads * d.depth;
#pragma omp parallel
  {
    std::vector<float> scratch;
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t n = pair / d.heads, h = pair % d.heads;
      const int64_t y_at = n * d.queries * ys + h * d.value_depth;
      backwardHead(d, drop, headView(d, drop, q, k, v, n, h), dy + y_at, y + y_at, ys,
                   lse + pair * d.queries, dq + n * d.queries * qs + h * d.depth,
                   dk + n * d.keys * qs + h * d.depth, dv + n * d.keys * ys + h * d.value_depth,
                   scratch);
    }
  }
}

}  // namespace tandem::backend::cpu
