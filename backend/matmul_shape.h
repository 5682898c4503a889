#pragma once

// A batched matrix product with transpose flags, in row-major terms, and the two products
// of its backward pass. Plain data shared by the CPU core (oneDNN matmul,
// backend/cpu/matmul_core.h) and the CUDA one (cuBLASLt, backend/cuda/matmul_lt.h), so
// both backends derive the gradients from one rule.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tandem::backend {

/// C[batch, m, n] = op(A)[batch, m, k] * op(B)[batch, k, n], every matrix row-major and
/// dense. A is stored [batch, m, k], or [batch, k, m] when trans_a (op(A) = A^T); B
/// [batch, k, n], or [batch, n, k] when trans_b. A broadcast operand is one matrix that
/// every batch entry uses (a weight shared by all tokens: batch 1 in storage).
struct MatmulShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool a_broadcast = false, b_broadcast = false;

  int64_t aBatch() const { return a_broadcast ? 1 : batch; }
  int64_t bBatch() const { return b_broadcast ? 1 : batch; }
  /// Rows and columns of A and B as stored.
  int64_t aRows() const { return trans_a ? k : m; }
  int64_t aCols() const { return trans_a ? m : k; }
  int64_t bRows() const { return trans_b ? n : k; }
  int64_t bCols() const { return trans_b ? k : n; }
  /// Multiply-adds of the product.
  int64_t macs() const { return batch * m * n * k; }

  bool operator==(const MatmulShape&) const = default;
};

/// "[4] 50x64 * 64x50^T" for errors and benchmark labels.
inline std::string describe(const MatmulShape& s) {
  return absl::StrCat("[", s.batch, "] ", s.m, "x", s.k, s.trans_a ? "(A^T)" : "",
                      s.a_broadcast ? "(shared A)" : "", " * ", s.k, "x", s.n,
                      s.trans_b ? "(B^T)" : "", s.b_broadcast ? "(shared B)" : "");
}

/// Which tensor of the forward pass a backward product reads.
enum class MatmulTensor { kA, kB, kDC };

/// One product of the backward pass: `shape` over (lhs, rhs), its result dA or dB as
/// stored (transposed when the forward operand was).
struct MatmulGradProduct {
  MatmulShape shape;
  MatmulTensor lhs, rhs;
};

/// dA of a forward product. A broadcast A (shared by the batch) has no dA product of
/// this form: its gradient sums over the batch (an error says so).
///   A plain:      dA[m,k] = dC * op(B)^T
///   A transposed: dA[k,m] = op(B) * dC^T
inline absl::StatusOr<MatmulGradProduct> matmulGradA(const MatmulShape& f) {
  if (f.a_broadcast && f.batch > 1)
    return absl::UnimplementedError(
        absl::StrCat("matmul ", describe(f),
                     ": the gradient of an A shared by the batch is not supported "
                     "(make B the shared operand, or fold the batch into m)"));
  MatmulShape s;
  s.batch = f.batch;
  s.b_broadcast = false;
  if (!f.trans_a) {
    s.m = f.m, s.n = f.k, s.k = f.n;
    s.trans_a = false, s.trans_b = !f.trans_b;
    s.b_broadcast = f.b_broadcast;
    return MatmulGradProduct{s, MatmulTensor::kDC, MatmulTensor::kB};
  }
  s.m = f.k, s.n = f.m, s.k = f.n;
  s.trans_a = f.trans_b, s.trans_b = true;
  s.a_broadcast = f.b_broadcast;
  return MatmulGradProduct{s, MatmulTensor::kB, MatmulTensor::kDC};
}

/// dB of a forward product.
///   B plain:      dB[k,n] = op(A)^T * dC
///   B transposed: dB[n,k] = dC^T * op(A)
/// A broadcast B (a weight shared by the batch) sums its gradient over the batch: with A
/// untransposed and not broadcast, the batch folds into the product's inner dimension
/// (A as [batch*m, k], dC as [batch*m, n]), one product of batch 1.
inline absl::StatusOr<MatmulGradProduct> matmulGradB(const MatmulShape& f) {
  MatmulShape s;
  s.batch = f.batch;
  int64_t inner = f.m;
  if (f.b_broadcast && f.batch > 1) {
    if (f.trans_a || f.a_broadcast)
      return absl::UnimplementedError(
          absl::StrCat("matmul ", describe(f),
                       ": the gradient of a B shared by the batch needs A "
                       "untransposed and per batch entry (its rows fold with the batch)"));
    s.batch = 1;
    inner = f.batch * f.m;
  }
  if (!f.trans_b) {
    s.m = f.k, s.n = f.n, s.k = inner;
    s.trans_a = !f.trans_a, s.trans_b = false;
    s.a_broadcast = f.a_broadcast && s.batch > 1;
    return MatmulGradProduct{s, MatmulTensor::kA, MatmulTensor::kDC};
  }
  s.m = f.n, s.n = f.k, s.k = inner;
  s.trans_a = true, s.trans_b = f.trans_a;
  s.b_broadcast = f.a_broadcast && s.batch > 1;
  return MatmulGradProduct{s, MatmulTensor::kDC, MatmulTensor::kA};
}

}  // namespace tandem::backend
