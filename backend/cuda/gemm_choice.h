#pragma once

// Which library call runs a matrix product of the linear family: one of cuBLASLt's
// heuristic results, tried in its order until one runs on scratch matrices of the
// product's sizes, or, where cuBLASLt has none that runs (a bf16 product with a bias
// epilogue and a 10-wide output is the likeliest corner), plain cuBLAS (cublasGemmEx), the
// bias then written into the output by an own kernel first and added through beta = 1.
// Chosen once, when the kernel is made. Plain code over an interface: the host tests give
// a library that refuses chosen candidates.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::backend::cuda {

/// How many of cuBLASLt's heuristic results a product asks for and may try.
inline constexpr int kLtCandidates = 8;

/// A candidate: cuBLASLt's heuristic result number `lt`, which needs `workspace` bytes, or
/// plain cuBLAS (lt < 0).
struct GemmCandidate {
  int lt = -1;
  int64_t workspace = 0;
  bool cublas() const { return lt < 0; }
  bool operator==(const GemmCandidate&) const = default;
};

/// What choosing asks of cuBLASLt and cuBLAS for one product.
class GemmTrials {
 public:
  virtual ~GemmTrials() = default;
  /// cuBLASLt's usable heuristic results, best first (at most kLtCandidates; those whose
  /// state is not success left out); none where cuBLASLt supports nothing for the product.
  virtual absl::StatusOr<std::vector<GemmCandidate>> heuristics() = 0;
  /// One run of `c` on scratch matrices, waited for: OK when it ran.
  virtual absl::Status tryRun(const GemmCandidate& c) = 0;
};

/// The first candidate that runs: cuBLASLt's results in order, then plain cuBLAS. An
/// error lists every refusal.
absl::StatusOr<GemmCandidate> chooseRunnableGemm(GemmTrials& trials);

/// "cuBLASLt heuristic result 2" or "cuBLAS (cublasGemmEx)".
std::string describeGemm(const GemmCandidate& c);

}  // namespace tandem::backend::cuda
