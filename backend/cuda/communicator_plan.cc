#include "backend/cuda/communicator_plan.h"

#include "absl/strings/str_cat.h"
#include "backend/reduction_tree.h"

namespace tandem::backend::cuda {
namespace {

// Where the CPU's tree splits n ranks (the same function: the same order).
int treeSplit(int n) { return static_cast<int>(backend::treeSplit(static_cast<size_t>(n))); }

// Ranks [lo, hi) reduced into slot lo: both halves first, then the left combined with the
// right (local_communicator.cc's treeReduceChunk, step for step).
void addSteps(TreePlan& plan, int& step, int lo, int hi) {
  if (hi - lo < 2) return;
  const int mid = lo + treeSplit(hi - lo);
  addSteps(plan, step, lo, mid);
  addSteps(plan, step, mid, hi);
  plan.into[step] = static_cast<uint8_t>(lo);
  plan.from[step] = static_cast<uint8_t>(mid);
  ++step;
}

}  // namespace

absl::StatusOr<TreePlan> treePlan(int ranks) {
  if (ranks < 1 || ranks > kMaxSharedRanks)
    return absl::InvalidArgumentError(absl::StrCat("a group of ", ranks,
                                                   " logical devices sharing GPUs: between 1 and ",
                                                   kMaxSharedRanks, " are supported"));
  TreePlan plan;
  plan.ranks = ranks;
  int step = 0;
  addSteps(plan, step, 0, ranks);
  return plan;
}

}  // namespace tandem::backend::cuda
