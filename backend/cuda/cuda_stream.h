#pragma once

// Streams and events of the CUDA backend: a cudaStream_t and a cudaEvent_t on one GPU,
// with the seam's semantics (backend/stream.h), which are CUDA's own.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/stream.h"

namespace tandem::backend::cuda {

class CudaEvent final : public Event {
 public:
  CudaEvent(cudaEvent_t event, int gpu) : event_(event), gpu_(gpu) {}
  ~CudaEvent() override;
  void synchronize() override;
  cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_;
  int gpu_;
};

class CudaStream final : public Stream {
 public:
  /// A non-blocking stream on GPU `gpu`; `high_priority` for the comm stream, so that a
  /// bucket's all_reduce is not queued behind backward kernels (as DDP and Horovod do).
  static absl::StatusOr<std::unique_ptr<CudaStream>> create(const Backend& backend,
                                                            std::string name, int gpu,
                                                            bool high_priority);
  ~CudaStream() override;

  const Backend& backend() const override { return backend_; }
  const std::string& name() const override { return name_; }
  void record(Event& event) override;
  void wait(Event& event) override;
  std::unique_ptr<Event> createEvent() override;
  void hostCallback(absl::AnyInvocable<void() &&> fn) override;
  /// A timing event recorded here; its time is read when the stream next synchronizes.
  void stamp(absl::AnyInvocable<void(int64_t ns) &&> done) override;
  absl::Status synchronize() override;

  cudaStream_t handle() const { return stream_; }
  int gpu() const { return gpu_; }
  /// Keeps the first error of an enqueue that the seam's void calls cannot return
  /// (record, wait, hostCallback, stamp); synchronize() returns it.
  void noteError(absl::Status s);
  /// The error kept by noteError, taken (a failed recording's, which belongs to the
  /// recording, not to the plain step that follows it).
  absl::Status takeNotedError() { return std::exchange(pending_, absl::OkStatus()); }

 private:
  CudaStream(const Backend& backend, std::string name, int gpu, cudaStream_t stream)
      : backend_(backend), name_(std::move(name)), gpu_(gpu), stream_(stream) {}

  /// Gives every stamp its time, now that the stream is idle: an event recorded now
  /// completes at once, so the host's clock read right after it stands for it, and each
  /// stamp is that moment less its distance from it on the GPU's clock.
  void resolveStamps();

  struct Stamp {
    cudaEvent_t event;
    absl::AnyInvocable<void(int64_t) &&> done;
  };

  const Backend& backend_;
  std::string name_;
  int gpu_;
  cudaStream_t stream_;
  absl::Status pending_;
  std::vector<Stamp> stamps_;             // recorded, not yet read
  std::vector<cudaEvent_t> free_events_;  // timing events to reuse
};

/// The CUDA stream behind a Stream of the CUDA backend (checked: a CPU stream here is an
/// internal error the caller reports).
CudaStream* asCudaStream(Stream& stream);

}  // namespace tandem::backend::cuda
