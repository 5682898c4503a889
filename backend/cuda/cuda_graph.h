#pragma once

// Steps recorded as one CUDA graph (stream capture) and replayed with one launch: the
// host's per-kernel launch cost, which dominates small models' steps on a GPU, is paid
// once. Several devices' streams join the capture of the first device's compute stream
// through events (fork), and rejoin it before the capture ends (join), so the graph holds
// every device's work, NCCL's included (NCCL supports capture since 2.9). Only where
// this process drives one GPU: NCCL's guide warns that capturing several GPUs per process
// may deadlock, most likely from one thread, so several GPUs run plain steps.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/backend.h"

namespace tandem::backend::cuda {

/// OK when steps on these GPUs (the physical ordinals of a process's devices) may be
/// recorded: one GPU, shared by any number of logical devices. Else the error saying why
/// not, which the executor turns into one warning and plain steps.
absl::Status checkRecordable(absl::Span<const int> gpus);

/// A recorder for the compute and comm streams of `devices` (CudaDevices).
absl::StatusOr<std::unique_ptr<StepRecorder>> makeCudaStepRecorder(
    absl::Span<Device* const> devices);

}  // namespace tandem::backend::cuda
