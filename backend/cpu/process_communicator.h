#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/communicator.h"
#include "backend/processes.h"

namespace tandem::backend::cpu {

/// The communicators of this process's members of a group of CPU devices that spans
/// processes, Horovod's hierarchical all_reduce with a fixed order: the local members
/// reduce what they own among themselves (a rendezvous of their comm-stream workers, as in
/// the local communicator), the first local member's worker exchanges that with the other
/// processes over MPI, and every local member combines and takes its copy.
///
/// Bit for bit the flat result: the group's ranks are added in the local communicator's
/// pairwise tree (local_communicator.h) over all of them. The tree is cut into its largest
/// subtrees whose ranks one process owns; each process reduces its own subtrees exactly as
/// the flat tree would, gathers everyone's subtree sums (MPI_Allgatherv, in the
/// accumulation dtype: f32 for bf16) and adds them up the rest of the tree, in the same
/// order on every process. MPI_Allreduce is not used: its order is the implementation's.
/// So `mpirun -np 2` with one device each gives the bits of one process with two devices,
/// whatever the split of devices over processes. A reduce_scatter reduces the same
/// subtrees, exchanges only the sums over each process's own shards (MPI_Alltoallv) and
/// finishes each shard up the same tree (the all_reduce's bits for that slice); an
/// all_gather packs each process's shards into one MPI_Allgatherv.
///
/// `owner[p]`: the process (rank in `comm`) of group position p; `local[i]`: the position
/// of this process's i-th member (ascending); `names[i]`: its device, for messages.
std::unique_ptr<CommunicatorGroup> makeProcessCommunicators(std::vector<int> owner,
                                                            std::vector<int> local,
                                                            std::vector<std::string> names,
                                                            std::shared_ptr<ProcessComm> comm);

}  // namespace tandem::backend::cpu
