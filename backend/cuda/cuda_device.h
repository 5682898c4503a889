#pragma once

// The CUDA backend: logical devices cuda:N, each with a compute and a (higher-priority)
// comm stream, a prefetch stream for the next batch's copy in, a context (cuDNN/cuBLAS
// handles, workspace), device memory from cudaMalloc, pinned host staging, copies as
// cudaMemcpy*Async, and the kernel table.

#include <memory>

#include "absl/container/flat_hash_set.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/cuda_stream.h"

namespace tandem::backend::cuda {

class CudaDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDevice>> create(const Backend& backend,
                                                            const ir::Device& device,
                                                            const DeviceOptions& options);

  const ir::Device& id() const override { return ctx_->device(); }
  MemoryLocation location() const override { return MemoryLocation::onDevice(index_); }
  Stream& computeStream() override { return *compute_; }
  Stream& commStream() override { return *comm_; }
  /// The next batch's host-to-device copies run here, on the copy engine, while the
  /// step before runs on the other two streams.
  Stream* prefetchStream() override { return prefetch_.get(); }

  absl::StatusOr<DeviceBuffer> allocate(int64_t bytes) override;
  absl::StatusOr<DeviceBuffer> allocateHost(int64_t bytes) override;
  absl::Status copySliceFromHost(const TensorView& whole, const TensorView& part, int axis,
                                 int64_t offset, Stream& stream) override;
  absl::Status copyIntoSlice(const TensorView& part, const TensorView& whole, int axis,
                             int64_t offset, Stream& stream) override;
  absl::Status copyFromHost(const TensorView& src, const TensorView& dst, Stream& stream) override;
  absl::Status copyToHost(const TensorView& src, const TensorView& dst, Stream& stream) override;
  /// Reads which activations of `g` its plan keeps NHWC (layout_plan.h).
  absl::Status prepareGraph(const ir::Graph& g) override;
  absl::StatusOr<std::unique_ptr<Kernel>> makeKernel(const ir::Node& node) override;

  /// The physical GPU (logical devices cuda:0,cuda:0 share GPU 0).
  int gpu() const { return ctx_->gpu(); }
  CudaContext& context() { return *ctx_; }
  CudaStream& cudaCompute() { return *compute_; }
  CudaStream& cudaComm() { return *comm_; }

 private:
  CudaDevice(int index, std::unique_ptr<CudaContext> ctx, std::unique_ptr<CudaStream> compute,
             std::unique_ptr<CudaStream> comm, std::unique_ptr<CudaStream> prefetch)
      : index_(index),
        ctx_(std::move(ctx)),
        compute_(std::move(compute)),
        comm_(std::move(comm)),
        prefetch_(std::move(prefetch)) {}

  int index_;
  std::unique_ptr<CudaContext> ctx_;
  std::unique_ptr<CudaStream> compute_, comm_, prefetch_;
  absl::flat_hash_set<const ir::Value*> nhwc_;  // of the graph being loaded
};

/// The CUDA backend (registered when the build found nvcc). It exists on machines
/// without a GPU too: making a device there is the error that says so.
const Backend& cudaBackend();

/// How many GPUs CUDA sees, or the error naming what CUDA reported ("no CUDA GPU on this
/// machine: cudaGetDeviceCount: cudaErrorNoDevice (no CUDA-capable device is detected)").
absl::StatusOr<int> gpuCount();

/// OK when this machine has the GPU `device` names; else the error naming the device.
absl::Status checkGpu(const ir::Device& device);

}  // namespace tandem::backend::cuda
