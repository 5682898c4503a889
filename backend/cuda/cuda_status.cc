#include "backend/cuda/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::backend::cuda {
namespace {

absl::Status failed(absl::string_view where, absl::string_view call, absl::string_view name,
                    absl::string_view text) {
  std::string message = absl::StrCat(where, ": ", call, " failed: ", name);
  if (!text.empty()) absl::StrAppend(&message, " (", text, ")");
  return absl::InternalError(message);
}

}  // namespace

absl::Status check(cudaError_t code, absl::string_view call, absl::string_view where) {
  if (code == cudaSuccess) return absl::OkStatus();
  return failed(where, call, cudaGetErrorName(code), cudaGetErrorString(code));
}

absl::Status check(cudnnStatus_t code, absl::string_view call, absl::string_view where) {
  if (code == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  // cuDNN 9 keeps a longer explanation of the last failure on this thread.
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  return failed(where, call, cudnnGetErrorString(code), detail);
}

absl::Status check(cublasStatus_t code, absl::string_view call, absl::string_view where) {
  if (code == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return failed(where, call, cublasGetStatusName(code), cublasGetStatusString(code));
}

absl::Status check(ncclResult_t code, absl::string_view call, absl::string_view where) {
  if (code == ncclSuccess) return absl::OkStatus();
  // ncclGetLastError(nullptr) gives the last error text NCCL logged on any communicator.
  const char* last = ncclGetLastError(nullptr);
  return failed(where, call, ncclGetErrorString(code), last != nullptr ? last : "");
}

}  // namespace tandem::backend::cuda
