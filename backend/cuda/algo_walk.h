#pragma once

// Walking a library's candidates until one runs. cuDNN's heuristics and cuBLASLt's may
// list an algorithm that then refuses the call (CUDNN_STATUS_NOT_SUPPORTED for a layout
// or math mode, a kernel that cannot launch for the shape); PyTorch tries its candidates
// in order and keeps the first that runs, and so do the convolution and matrix-product
// kernels, once per shape, when the kernel is made. Plain code: the host tests walk a fake
// library that refuses some candidates.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tandem::backend::cuda {

/// The index of the first of `candidates` for which `run` succeeds, trying them in order.
/// When none does, an error: `what` and every candidate's refusal, named by `name`
/// ("cuDNN ran none of 3 algorithms: algorithm 1: CUDNN_STATUS_NOT_SUPPORTED (...); ...").
template <typename Candidate, typename Name, typename Run>
absl::StatusOr<size_t> firstThatRuns(const std::vector<Candidate>& candidates, Name name, Run run,
                                     absl::string_view what) {
  std::string refusals;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const absl::Status ran = run(candidates[i]);
    if (ran.ok()) return i;
    absl::StrAppend(&refusals, refusals.empty() ? "" : "; ", name(candidates[i]), ": ",
                    ran.message());
  }
  if (candidates.empty()) return absl::NotFoundError(absl::StrCat(what, ": no candidate to try"));
  return absl::UnimplementedError(
      absl::StrCat(what, ": none of ", candidates.size(), " ran: ", refusals));
}

}  // namespace tandem::backend::cuda
