#pragma once

// What oneDNN 2.6's softmax and logsoftmax primitives get wrong around non-finite values,
// found and put right around them (softmax_core.cc). PyTorch computes a row as
// exp(x - max) / sum, so a row holding a NaN or +inf (inf - inf), or only -inf
// (-inf - -inf), is NaN throughout; oneDNN's max skips NaN (its vmaxps keeps the other
// operand) and its exp turns NaN into finite values, so such a row came out as
// [nan, 0, 0, nan] and the like. Its logsoftmax backward's exp(y) does the same to a NaN
// y. The primitives stay (their vectorized exp is what makes softmax fast). Before one
// runs, a vectorized pass over its input says whether any value is NaN or infinite; only
// then (never in ordinary training) are the rows flagged and, after the primitive, the
// flagged rows rewritten. The pass costs about a tenth of attention's softmax
// (bench/transformer_cores_bench Softmax/fwd; a pass over the output after the primitive
// would cost the same, and would trust oneDNN's exp to keep a NaN).
//
// A tensor is [outer, axis, inner] (axis_split.h): row (o, i) is the axis' values
// x[(o * axis + a) * inner + i], consecutive when inner = 1.

#include <cstdint>
#include <vector>

#include "backend/axis_split.h"
#include "backend/bf16.h"

namespace tandem::backend::cpu {

/// The rows of x that PyTorch's softmax and log-softmax make NaN, as indices o * inner +
/// i into `rows` (cleared first; empty when none, the usual case). `flags` is scratch of
/// 2 * outer * inner bytes.
template <typename T>
void findNanRows(const T* x, const AxisSplit& d, std::vector<uint8_t>& flags,
                 std::vector<int64_t>& rows);

/// Writes NaN over each listed row of y.
template <typename T>
void fillNanRows(T* y, const AxisSplit& d, const std::vector<int64_t>& rows);

/// The rows holding a y that is NaN or above 0 (no log-softmax output is: such a y is
/// NaN, or not a log-softmax's), where oneDNN's exp(y) cannot be trusted, with a copy of
/// each such row's dy and its sum, taken before the primitive runs (dx may be dy).
struct LogSoftmaxGradRows {
  std::vector<int64_t> rows;
  std::vector<float> dy;  // `axis` values per listed row
  std::vector<float> dy_sums;
};
template <typename T>
void findLogSoftmaxGradRows(const T* y, const T* dy, const AxisSplit& d,
                            std::vector<uint8_t>& flags, LogSoftmaxGradRows& out);

/// dx = dy - exp(y) * sum(dy) at each element of the listed rows whose y is NaN or above
/// 0 (PyTorch's formula; the others are oneDNN's, which gets them right).
template <typename T>
void fixLogSoftmaxGradRows(const T* y, T* dx, const AxisSplit& d, const LogSoftmaxGradRows& rows);

}  // namespace tandem::backend::cpu
