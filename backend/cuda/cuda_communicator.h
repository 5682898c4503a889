#pragma once

// Collectives between CUDA devices of this process, enqueued on their comm streams.

#include <memory>
#include <string>

#include <nccl.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/backend.h"
#include "backend/communicator.h"
#include "backend/processes.h"

namespace tandem::backend::cuda {

/// The communicators of `group` (CudaDevices of this process, in the group's order):
/// NCCL (ncclCommInitAll, grouped calls) when every device has a GPU of its own; when
/// logical devices share a GPU (--devices cuda:0,cuda:0), which NCCL refuses, a
/// same-process communicator that reduces through device memory with own kernels in a
/// fixed order.
absl::StatusOr<std::unique_ptr<CommunicatorGroup>> makeCommunicators(
    absl::Span<Device* const> group);

/// This process's members `local` of a group that spans processes (`members`: every
/// device of the group in its order, with its rank): one NCCL communicator whose rank i is
/// members' position i, its unique id made by the first process and sent to the others
/// through `processes` (MPI), the local ranks initialized as one NCCL group.
absl::StatusOr<std::unique_ptr<CommunicatorGroup>> makeProcessCommunicators(
    absl::Span<Device* const> local, absl::Span<const ir::Device> members,
    std::shared_ptr<ProcessComm> processes);

/// NCCL's unique id for a communicator across `processes`: ncclGetUniqueId on their
/// rank 0 (which needs no GPU), broadcast to the others. `what` names the group in errors.
absl::StatusOr<ncclUniqueId> shareUniqueId(ProcessComm& processes, const std::string& what);

}  // namespace tandem::backend::cuda
