#pragma once

// A row-major batched product (backend/matmul_shape.h) as cuBLASLt's column-major one. A
// row-major [R, C] matrix is the column-major C x R matrix with leading dimension C, so
// C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its B
// is our A, each transposed exactly when ours is. Batches are strided; a broadcast
// operand (one matrix for the whole batch) has stride 0. Plain data, no CUDA calls: the
// host tests run the plan through a reference column-major GEMM against the CPU core.

#include <cstdint>

#include "backend/matmul_shape.h"

namespace tandem::backend::cuda {

/// cuBLASLt's D (m x n, column-major, ld ldd) = op(A) (m x k) op(B) (k x n) per batch,
/// where "A" is the product's B operand and "B" its A operand (swapped: see above).
struct MatmulLtPlan {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements between batch entries

  /// The stored matrices as cuBLASLt's layouts describe them (rows x columns).
  int64_t aRows() const { return trans_a ? k : m; }
  int64_t aCols() const { return trans_a ? m : k; }
  int64_t bRows() const { return trans_b ? n : k; }
  int64_t bCols() const { return trans_b ? k : n; }
};

inline MatmulLtPlan matmulLtPlan(const MatmulShape& s) {
  MatmulLtPlan p;
  p.m = s.n;
  p.n = s.m;
  p.k = s.k;
  // Our B stored [k, n] is column-major n x k (ld n): op N gives m x k. Stored [n, k]
  // (trans_b) it is k x n (ld k): op T.
  p.trans_a = s.trans_b;
  p.lda = s.bCols();
  // Our A stored [m, k] is column-major k x m (ld k): op N gives k x n. Stored [k, m]
  // (trans_a) it is m x k (ld m): op T.
  p.trans_b = s.trans_a;
  p.ldb = s.aCols();
  p.ldd = s.n;
  p.batch = s.batch;
  p.stride_a = s.b_broadcast ? 0 : s.k * s.n;
  p.stride_b = s.a_broadcast ? 0 : s.m * s.k;
  p.stride_d = s.m * s.n;
  return p;
}

}  // namespace tandem::backend::cuda
