#include "backend/cuda/cuda_context.h"

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_status.h"

namespace tandem::backend::cuda {

CudaContext::CudaContext(const ir::Device& device, int gpu, const DeviceOptions& options,
                         const CudaOptions& own)
    : device_(device),
      name_(ir::toString(device)),
      gpu_(gpu),
      options_(options),
      own_(own),
      workspace_(name_, Workspace::Memory{
                            .allocate = [gpu](int64_t bytes) -> absl::StatusOr<void*> {
                              void* p = nullptr;
                              CUDA_TRY("cudaMalloc", cudaSetDevice(gpu));
                              CUDA_TRY("cudaMalloc", cudaMalloc(&p, static_cast<size_t>(bytes)));
                              return p;
                            },
                            .release =
                                [gpu](void* p) {
                                  cudaSetDevice(gpu);
                                  cudaFree(p);
                                },
                            .idle = [gpu]() -> absl::Status {
                              CUDA_TRY("the old workspace", cudaSetDevice(gpu));
                              CUDA_TRY("the old workspace", cudaDeviceSynchronize());
                              return absl::OkStatus();
                            }}) {
  options_.settings = nullptr;  // the caller's, valid only during creation: own_ has it
}

absl::StatusOr<std::unique_ptr<CudaContext>> CudaContext::create(const ir::Device& device,
                                                                 int gpu,
                                                                 const DeviceOptions& options) {
  absl::StatusOr<CudaOptions> own = cudaOptions().read(options.settings);
  if (!own.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(ir::toString(device), ": ", own.status().message()));
  std::unique_ptr<CudaContext> ctx(new CudaContext(device, gpu, options, *own));
  const std::string& where = ctx->name();
  CUDA_TRY(where, cudaSetDevice(gpu));
  CUDA_TRY(where, cudnnCreate(&ctx->cudnn_));
  CUDA_TRY(where, cublasCreate(&ctx->cublas_));
  CUDA_TRY(where, cublasLtCreate(&ctx->cublas_lt_));
  // TF32 for f32 GEMMs when allowed; cuBLAS otherwise keeps full f32 (the convolutions
  // choose it per descriptor: conv_kernels.cc).
  CUDA_TRY(where, cublasSetMathMode(ctx->cublas_, ctx->own_.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                       : CUBLAS_DEFAULT_MATH));
  return ctx;
}

CudaContext::~CudaContext() {
  cudaSetDevice(gpu_);
  if (cublas_lt_ != nullptr) cublasLtDestroy(cublas_lt_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
}

}  // namespace tandem::backend::cuda
