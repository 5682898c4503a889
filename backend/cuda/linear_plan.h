#pragma once

// How the linear family's row-major products map onto column-major cuBLAS(Lt): a
// row-major [R,C] matrix is the column-major C x R matrix with leading dimension C, so
// every product is computed transposed (y^T = w x^T, ...). Plain data, no CUDA calls:
// the host tests check the mapping against the CPU backend with a reference GEMM.

#include <cstdint>

namespace tandem::backend::cuda {

/// D (m x n, column-major, leading dimension ldd) = op(A) (m x k) * op(B) (k x n), where
/// A is the node's operand `a` stored column-major with leading dimension lda (k x m when
/// trans_a, else m x k), and B likewise. D is the node's first result.
struct GemmPlan {
  int a = 0, b = 0;  // operand indices of the node
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;

  /// A and B as stored (before op): rows and columns of the column-major matrices.
  int64_t aRows() const { return trans_a ? k : m; }
  int64_t aCols() const { return trans_a ? m : k; }
  int64_t bRows() const { return trans_b ? n : k; }
  int64_t bCols() const { return trans_b ? k : n; }
};

/// linear: x[N,I] (operand 0), w[O,I] (operand 1) -> y[N,O].
/// y^T (O x N, ld O) = (w stored I x O)^T * (x stored I x N). A bias of length O adds to
/// every row of D (cuBLASLt's bias epilogue: one value per row of D).
inline GemmPlan linearPlan(int64_t rows, int64_t in, int64_t out) {
  return {.a = 1,
          .b = 0,
          .trans_a = true,
          .trans_b = false,
          .m = out,
          .n = rows,
          .k = in,
          .lda = in,
          .ldb = in,
          .ldd = out};
}

/// linear_backward_data: dy[N,O] (operand 0), w[O,I] (operand 1) -> dx[N,I] = dy w.
/// dx^T (I x N, ld I) = (w stored I x O) * (dy stored O x N).
inline GemmPlan linearBackwardDataPlan(int64_t rows, int64_t in, int64_t out) {
  return {.a = 1,
          .b = 0,
          .trans_a = false,
          .trans_b = false,
          .m = in,
          .n = rows,
          .k = out,
          .lda = in,
          .ldb = out,
          .ldd = in};
}

/// linear_backward_weight: dy[N,O] (operand 0), x[N,I] (operand 1) -> dw[O,I] = dy^T x.
/// dw^T (I x O, ld I) = (x stored I x N) * (dy stored O x N)^T.
inline GemmPlan linearBackwardWeightPlan(int64_t rows, int64_t in, int64_t out) {
  return {.a = 1,
          .b = 0,
          .trans_a = false,
          .trans_b = true,
          .m = in,
          .n = out,
          .k = rows,
          .lda = in,
          .ldb = out,
          .ldd = in};
}

}  // namespace tandem::backend::cuda
