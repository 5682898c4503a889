#pragma once

// The watchdog's view of an NCCL communicator group (backend/processes.h, AsyncWaits).
// NCCL's collectives wait on the GPU: a dead or stalled peer leaves a rank's kernel
// spinning and the host stuck in a later cudaStreamSynchronize, with nothing to say why.
// So each collective is bracketed on its comm stream by two events (recorded as external
// events, so that a recorded step's replay records them too): one before it, complete
// when the collective can start, and one after it. The watchdog thread polls them: a
// collective whose start is complete and whose end is not has waited since the poll that
// first saw it so, and one that waits --collective-timeout, or a communicator that reports
// an asynchronous error (ncclCommGetAsyncError), makes every rank stop with one line
// naming the rank, the collective and the device, after ncclCommAbort of the group's
// communicators, as NCCL's guide asks and PyTorch's watchdog does.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backend/processes.h"

namespace tandem::backend::cuda {

class NcclWatch final : public AsyncWaits {
 public:
  /// The calls the watch makes, so that the host tests can run it without a GPU; the
  /// real one is a thin pass-through (realNcclProbe).
  class Probe {
   public:
    virtual ~Probe() = default;
    virtual absl::Status createEvent(int gpu, cudaEvent_t* event) = 0;
    virtual void destroyEvent(int gpu, cudaEvent_t event) = 0;
    /// Records `event` on `stream` (cudaEventRecordWithFlags; external while the stream is
    /// captured, so that graphs keep it).
    virtual absl::Status record(int gpu, cudaEvent_t event, cudaStream_t stream) = 0;
    /// Whether the event's latest record has completed (cudaEventQuery).
    virtual bool done(int gpu, cudaEvent_t event) = 0;
    /// ncclCommGetAsyncError's answer (ncclSuccess or ncclInProgress: healthy).
    virtual ncclResult_t asyncError(ncclComm_t comm) = 0;
    virtual std::string lastError(ncclComm_t comm) = 0;
    virtual void abort(ncclComm_t comm) = 0;
    /// Seconds on a steady clock.
    virtual double now() = 0;
  };

  /// One rank of this process: its communicator, GPU and device ("cuda:0@1").
  struct Rank {
    ncclComm_t comm;
    int gpu;
    std::string device;
    int rank;  // its rank in the communicator
  };

  NcclWatch(std::string group, std::vector<Rank> ranks, std::unique_ptr<Probe> probe);
  ~NcclWatch() override;

  /// Before local rank `i`'s collective `label` is enqueued on `stream`: the start event.
  /// Returns the collective's index for end().
  absl::StatusOr<size_t> begin(size_t i, const std::string& label, cudaStream_t stream);
  /// After the collective was enqueued (after the outermost ncclGroupEnd): the end event.
  absl::Status end(size_t collective, cudaStream_t stream);

  State poll() override;
  void abort() override;

 private:
  struct Collective {
    size_t rank;
    std::string label;
    cudaEvent_t start = nullptr, end = nullptr;
    double since = -1;  // when a poll first saw it waiting; -1: not waiting
  };

  std::string group_;
  std::vector<Rank> ranks_;
  std::unique_ptr<Probe> probe_;
  std::mutex mu_;
  // Every collective seen, kept by (rank, label): the same events serve every step.
  std::vector<Collective> collectives_;
  bool aborted_ = false;
};

/// The probe over CUDA and NCCL.
std::unique_ptr<NcclWatch::Probe> realNcclProbe();

}  // namespace tandem::backend::cuda
