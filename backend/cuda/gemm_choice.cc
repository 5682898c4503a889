#include "backend/cuda/gemm_choice.h"

#include "absl/strings/str_cat.h"
#include "backend/cuda/algo_walk.h"

namespace tandem::backend::cuda {

std::string describeGemm(const GemmCandidate& c) {
  return c.cublas() ? "cuBLAS (cublasGemmEx)" : absl::StrCat("cuBLASLt heuristic result ", c.lt);
}

absl::StatusOr<GemmCandidate> chooseRunnableGemm(GemmTrials& trials) {
  std::vector<GemmCandidate> candidates;
  std::string why_no_lt;
  absl::StatusOr<std::vector<GemmCandidate>> lt = trials.heuristics();
  if (lt.ok())
    candidates = *std::move(lt);
  else
    why_no_lt = absl::StrCat(" (cuBLASLt's heuristics: ", lt.status().message(), ")");
  candidates.push_back(GemmCandidate{});  // plain cuBLAS, last
  absl::StatusOr<size_t> ran = firstThatRuns(
      candidates, describeGemm, [&](const GemmCandidate& c) { return trials.tryRun(c); },
      absl::StrCat("no cuBLASLt algorithm nor cuBLAS runs this product", why_no_lt));
  if (!ran.ok()) return ran.status();
  return candidates[*ran];
}

}  // namespace tandem::backend::cuda
