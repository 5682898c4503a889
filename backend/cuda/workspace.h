#pragma once

// The scratch memory a logical CUDA device's kernels share (cuDNN and cuBLASLt
// workspaces, weights converted or reordered for one call): one buffer, since the kernels
// of a device run one at a time in its compute stream's order. Every kernel reserves what
// it needs when it is made, so the buffer reaches its final size while the module loads
// and never moves afterwards: a recorded step (a CUDA graph) points into it, and a graph
// run for the first time after another was recorded (an evaluation after epoch 1) must
// not free memory that recording replays into. A need found later is an error naming the
// kernel, never a reallocation. Kernels of a planned module do not use it: their workspace
// is the bytes of the arena the plan gives them (plan{workspace=[...]}, bound by the
// loader: CudaKernel::needWorkspace). It serves kernels made outside a module's plan (the
// kernel tests), and the same rule holds for it.

#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"

namespace tandem::backend::cuda {

class Workspace {
 public:
  /// How the buffer is had and given back (cudaMalloc/cudaFree on the device's GPU; host
  /// memory in the tests). `idle` waits until no work may still read the old buffer
  /// before it is freed (cudaDeviceSynchronize: only ever at load).
  struct Memory {
    absl::AnyInvocable<absl::StatusOr<void*>(int64_t bytes)> allocate;
    absl::AnyInvocable<void(void*)> release;
    absl::AnyInvocable<absl::Status()> idle;
  };
  Workspace(std::string device, Memory memory)
      : device_(std::move(device)), memory_(std::move(memory)) {}
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  /// Makes room for `bytes` for kernel `what` (its description), when the kernel is made.
  /// After freeze() a need beyond the buffer is an error naming the kernel.
  absl::Status reserve(int64_t bytes, const std::string& what);
  /// The buffer for a launch of `what` that needs `bytes`; an error naming the kernel when
  /// it reserved less (a launch never allocates).
  absl::StatusOr<void*> get(int64_t bytes, const std::string& what) const;
  /// From now on the buffer never moves (a step is being recorded).
  void freeze() { frozen_ = true; }

  int64_t bytes() const { return bytes_; }
  /// The kernel whose need set the size, for errors ("" when nothing was reserved).
  const std::string& largest() const { return largest_; }

 private:
  std::string device_;
  Memory memory_;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  std::string largest_;
  bool frozen_ = false;
};

}  // namespace tandem::backend::cuda
