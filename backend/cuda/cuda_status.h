#pragma once

// Every CUDA, cuDNN, cuBLAS and NCCL call's return code becomes an absl::Status that
// names the node (or device) and the call:
//   "%conv1.0 (conv2d @cuda:0): cudnnConvolutionForward(...) failed: CUDNN_STATUS_BAD_PARAM (...)".

#include "absl/strings/string_view.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {

/// OK when `code` says success; else an error "<where>: <call> failed: <name> (<text>)".
absl::Status check(cudaError_t code, absl::string_view call, absl::string_view where);
absl::Status check(cudnnStatus_t code, absl::string_view call, absl::string_view where);
absl::Status check(cublasStatus_t code, absl::string_view call, absl::string_view where);
absl::Status check(ncclResult_t code, absl::string_view call, absl::string_view where);

}  // namespace tandem::backend::cuda

/// Returns from the enclosing function (which returns a Status or StatusOr) when `call`
/// fails, naming `where` (a node's description, a device) and the call's text.
#define CUDA_TRY(where, call) \
  RETURN_IF_ERROR(::tandem::backend::cuda::check((call), #call, (where)))
