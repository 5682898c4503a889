#pragma once

// Streams and events of the CUDA backend: a cudaStream_t and a cudaEvent_t on one GPU,
// with the seam's semantics (backend/stream.h), which are CUDA's own.

#include <memory>
#include <string>

#include <cuda_runtime_api.h>

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
  absl::Status synchronize() override;

  cudaStream_t handle() const { return stream_; }
  int gpu() const { return gpu_; }
  /// Keeps the first error of an enqueue that the seam's void calls cannot return
  /// (record, wait, hostCallback); synchronize() returns it.
  void noteError(absl::Status s);

 private:
  CudaStream(const Backend& backend, std::string name, int gpu, cudaStream_t stream)
      : backend_(backend), name_(std::move(name)), gpu_(gpu), stream_(stream) {}

  const Backend& backend_;
  std::string name_;
  int gpu_;
  cudaStream_t stream_;
  absl::Status pending_;
};

/// The CUDA stream behind a Stream of the CUDA backend (checked: a CPU stream here is an
/// internal error the caller reports).
CudaStream* asCudaStream(Stream& stream);

}  // namespace tandem::backend::cuda
