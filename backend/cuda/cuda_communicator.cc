// Collectives between CUDA devices (not written yet).

#include "backend/cuda/cuda_communicator.h"

namespace tandem::backend::cuda {

absl::StatusOr<std::unique_ptr<CommunicatorGroup>> makeCommunicators(
    absl::Span<Device* const> group) {
  (void)group;
  return absl::UnimplementedError("collectives between CUDA devices are not written yet");
}

}  // namespace tandem::backend::cuda
