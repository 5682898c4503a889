#pragma once

// Collectives between CUDA devices of this process, enqueued on their comm streams.

#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/backend.h"
#include "backend/communicator.h"

namespace tandem::backend::cuda {

/// The communicators of `group` (CudaDevices of this process, in the group's order):
/// NCCL (ncclCommInitAll, grouped calls) when every device has a GPU of its own; when
/// logical devices share a GPU (--devices cuda:0,cuda:0), which NCCL refuses, a
/// same-process communicator that reduces through device memory with own kernels in a
/// fixed order.
absl::StatusOr<std::unique_ptr<CommunicatorGroup>> makeCommunicators(
    absl::Span<Device* const> group);

}  // namespace tandem::backend::cuda
