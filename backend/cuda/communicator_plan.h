#pragma once

// The reduction order of the same-GPU communicator, made on the host.

#include "absl/status/statusor.h"
#include "backend/cuda/communicator_math.h"

namespace tandem::backend::cuda {

/// The CPU local communicator's pairwise tree over `ranks` ranks in order (split at the
/// largest power of two below the count: ((r0+r1)+(r2+r3))+r4) as combine steps; an
/// error when ranks is not in [1, kMaxSharedRanks].
absl::StatusOr<TreePlan> treePlan(int ranks);

}  // namespace tandem::backend::cuda
