#pragma once

// What the kernels of one logical CUDA device share: its GPU, the library handles bound
// to it, the scratch workspace and the run's settings. One context per logical device,
// used only from the host thread that enqueues the device's work (the executor's), so it
// needs no locking; the kernels that use it run in the order of the compute stream.

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_options.h"
#include "backend/cuda/workspace.h"
#include "ir/types.h"

namespace tandem::backend::cuda {

class CudaContext {
 public:
  /// Makes the handles on GPU `gpu` (the device's ordinal; logical devices cuda:0,cuda:0
  /// share one GPU and each get their own context).
  static absl::StatusOr<std::unique_ptr<CudaContext>> create(const ir::Device& device, int gpu,
                                                             const DeviceOptions& options);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const ir::Device& device() const { return device_; }
  /// "cuda:0" for errors that name no node.
  const std::string& name() const { return name_; }
  int gpu() const { return gpu_; }
  uint64_t seed() const { return options_.seed; }
  const DeviceOptions& options() const { return options_; }
  /// Whether f32 matrix products and convolutions may use TF32 tensor cores
  /// (`--no-tf32` forbids it).
  bool allowTf32() const { return own_.allow_tf32; }
  /// kMeasure: time every cuDNN algorithm once per shape (`--conv-algorithm measure`).
  bool measureConvAlgorithms() const { return own_.conv_algorithm == ConvAlgorithm::kMeasure; }

  /// Handles bound to this GPU. A kernel sets the stream it enqueues on before each call
  /// (cudnnSetStream, cublasSetStream): setting it is a cheap field store.
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublasLt() const { return cublas_lt_; }

  /// Scratch memory for one kernel at a time (workspace.h): each kernel reserves its need
  /// when it is made, so the buffer has its final size once the module is loaded; a
  /// launch only looks it up (an error naming the kernel when it reserved less).
  absl::Status reserveWorkspace(int64_t bytes, const std::string& what) {
    return workspace_.reserve(bytes, what);
  }
  absl::StatusOr<void*> workspace(int64_t bytes, const std::string& what) const {
    return workspace_.get(bytes, what);
  }
  /// A step is being recorded: the workspace never moves again.
  void freezeWorkspace() { workspace_.freeze(); }

 private:
  CudaContext(const ir::Device& device, int gpu, const DeviceOptions& options,
              const CudaOptions& own);

  ir::Device device_;
  std::string name_;
  int gpu_;
  DeviceOptions options_;  // its `settings` pointer cleared: own_ holds what they gave
  CudaOptions own_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
  Workspace workspace_;
};

}  // namespace tandem::backend::cuda
