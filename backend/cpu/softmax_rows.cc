#include "backend/cpu/softmax_rows.h"

#include <cmath>
#include <limits>

#include "backend/cpu/finite_scan.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Per row two flags, kept as bytes so that the loops vectorize (compares OR-ed into
// masks, no branch): `bad` and `live`. For a softmax's input (kOutput false) bad is a
// value not below +inf (NaN or +inf) and live a value above -inf: the row gives NaN when
// bad or not live. For a log-softmax's output y (kOutput true) bad is a y not at most 0
// (NaN, or above 0, which no log-softmax gives) and live is unused. Along the last axis
// a row is contiguous and reduced on its own; otherwise the axis' values of `inner` rows
// are interleaved, and the flags of those rows are updated side by side.
template <bool kOutput>
inline void flag(float v, uint8_t& bad, uint8_t& live) {
  if constexpr (kOutput) {
    bad |= !(v <= 0.0f);
  } else {
    bad |= !(v < kInf);
    live |= v > -kInf;
  }
}

template <bool kOutput, typename T>
TANDEM_VECTOR_LOOPS void scanRows(const T* x, int64_t outer, int64_t axis, int64_t inner,
                                  uint8_t* bad, uint8_t* live) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = x + o * axis;
      uint8_t b = 0, l = 0;
      for (int64_t a = 0; a < axis; ++a) flag<kOutput>(row[a], b, l);
      bad[o] = b;
      live[o] = l;
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    uint8_t* b = bad + o * inner;
    uint8_t* l = live + o * inner;
    for (int64_t i = 0; i < inner; ++i) b[i] = 0, l[i] = 0;
    for (int64_t a = 0; a < axis; ++a) {
      const T* v = x + (o * axis + a) * inner;
      for (int64_t i = 0; i < inner; ++i) flag<kOutput>(v[i], b[i], l[i]);
    }
  }
}

/// Element a of row r (o * inner + i).
int64_t at(const AxisSplit& d, int64_t r, int64_t a) {
  return (r / d.inner * d.axis + a) * d.inner + r % d.inner;
}

}  // namespace

template <typename T>
void findNanRows(const T* x, const AxisSplit& d, std::vector<uint8_t>& flags,
                 std::vector<int64_t>& rows) {
  rows.clear();
  // Only a NaN or an infinity makes a row NaN: a tensor of finite values (the usual case)
  // costs one vectorized pass, without the per-row flags.
  if (allFinite(x, d.numElements())) return;
  const int64_t n = d.outer * d.inner;
  flags.resize(static_cast<size_t>(2 * n));
  uint8_t *bad = flags.data(), *live = flags.data() + n;
  scanRows<false>(x, d.outer, d.axis, d.inner, bad, live);
  for (int64_t r = 0; r < n; ++r)
    if (bad[r] || !live[r]) rows.push_back(r);
}

template <typename T>
void fillNanRows(T* y, const AxisSplit& d, const std::vector<int64_t>& rows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t r : rows)
    for (int64_t a = 0; a < d.axis; ++a) y[at(d, r, a)] = nan;
}

template <typename T>
void findLogSoftmaxGradRows(const T* y, const T* dy, const AxisSplit& d,
                            std::vector<uint8_t>& flags, LogSoftmaxGradRows& out) {
  const int64_t n = d.outer * d.inner;
  flags.resize(static_cast<size_t>(2 * n));
  uint8_t *bad = flags.data(), *live = flags.data() + n;
  scanRows<true>(y, d.outer, d.axis, d.inner, bad, live);
  out.rows.clear();
  out.dy.clear();
  out.dy_sums.clear();
  for (int64_t r = 0; r < n; ++r) {
    if (!bad[r]) continue;
    out.rows.push_back(r);
    float sum = 0;
    for (int64_t a = 0; a < d.axis; ++a) {
      const float g = dy[at(d, r, a)];
      out.dy.push_back(g);
      sum += g;
    }
    out.dy_sums.push_back(sum);
  }
}

template <typename T>
void fixLogSoftmaxGradRows(const T* y, T* dx, const AxisSplit& d, const LogSoftmaxGradRows& rows) {
  for (size_t k = 0; k < rows.rows.size(); ++k) {
    const float* dy = rows.dy.data() + k * static_cast<size_t>(d.axis);
    for (int64_t a = 0; a < d.axis; ++a) {
      const int64_t e = at(d, rows.rows[k], a);
      const float v = y[e];
      if (!(v <= 0.0f)) dx[e] = dy[a] - std::exp(v) * rows.dy_sums[k];
    }
  }
}

#define TANDEM_SOFTMAX_ROWS(T)                                                      \
  template void findNanRows(const T*, const AxisSplit&, std::vector<uint8_t>&,      \
                            std::vector<int64_t>&);                                 \
  template void fillNanRows(T*, const AxisSplit&, const std::vector<int64_t>&);     \
  template void findLogSoftmaxGradRows(const T*, const T*, const AxisSplit&,        \
                                       std::vector<uint8_t>&, LogSoftmaxGradRows&); \
  template void fixLogSoftmaxGradRows(const T*, T*, const AxisSplit&, const LogSoftmaxGradRows&);
TANDEM_SOFTMAX_ROWS(float)
TANDEM_SOFTMAX_ROWS(bf16)
#undef TANDEM_SOFTMAX_ROWS

}  // namespace tandem::backend::cpu
