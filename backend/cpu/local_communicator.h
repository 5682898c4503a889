#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "backend/communicator.h"

namespace tandem::backend::cpu {

/// The ranks are devices of this process sharing memory; each rank's calls enqueue the
/// collective on its comm stream, whose worker meets the others there. A collective is a
/// rendezvous: every rank posts its buffers, the work is split by rank, and a second
/// barrier keeps any rank from leaving while others still touch its buffers.
///
/// Reductions add the ranks' values in one fixed order whatever the timing, so two runs
/// give bit-identical results and every rank receives the same bits. The order is a
/// pairwise tree over the ranks in order (split at the largest power of two below the
/// count: ((r0+r1)+(r2+r3))+r4), so that reducing within contiguous groups of a
/// power-of-two size and then across the groups adds exactly as the flat reduction does:
/// a hierarchical all_reduce equals the flat one bit for bit. A reduce_scatter reduces
/// each element of a rank's shard in that same order (so the shard is the bits of the
/// all_reduce's slice); an all_gather copies every rank's shard into every rank's buffer.
std::unique_ptr<CommunicatorGroup> makeLocalCommunicators(int size);

/// The fixed reduction order on its own: `ranks` values combined as the local
/// communicator combines them (for tests and the documentation of that order).
double treeReduce(absl::Span<const double> ranks, ReduceOp op);

}  // namespace tandem::backend::cpu
