#pragma once

// Batched matrix products with transpose flags (backend/matmul_shape.h) on cuBLASLt:
// the CUDA side of the CPU's MatmulCore (backend/cpu/matmul_core.h), for the forward
// product and matmulGradA/B's backward ones. A thin layer: descriptors, layouts (strided
// batches, matmul_plan.h's row-major -> column-major mapping) and the algorithm are
// chosen once, when the op's kernel is made; run() only enqueues the call. The algorithm
// is the first that runs on scratch matrices of the product's sizes (gemm_choice.h, as
// the linear kernels choose): cuBLASLt's heuristic results in order, then plain cuBLAS
// (cublasGemmStridedBatchedEx, the bias copied into C first and added through beta = 1),
// since cuBLASLt's first result may refuse at run time. Every cuBLAS(Lt) return code
// becomes a Status naming the caller (`where`) and the call.
//
// Types: A and B of one type (f32 or bf16; a caller with an f32 master weight beside bf16
// activations converts it first, as the linear kernels do), C f32 or bf16, f32
// accumulation (TF32 allowed for f32 unless the device forbids it); a bias of n values
// of C's type (cuBLASLt's bias epilogue), a scale of the product (alpha).

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/cuda/gemm_choice.h"
#include "backend/matmul_shape.h"
#include "ir/types.h"

namespace tandem::backend::cuda {

struct MatmulLtSpec {
  MatmulShape shape;
  ir::DType ab = ir::DType::kF32;  // A and B
  ir::DType c = ir::DType::kF32;
  bool bias = false;  // n values of C's type added to every row of C
  float scale = 1.0f;
  bool allow_tf32 = true;
};

/// The two libraries a product may run on (a device's handles).
struct BlasHandles {
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
};

class MatmulLt {
 public:
  /// Describes the product and chooses its algorithm by running candidates on scratch
  /// matrices (allocated and freed here, on a stream of its own, waited for).
  static absl::StatusOr<std::unique_ptr<MatmulLt>> make(const BlasHandles& handles,
                                                        const MatmulLtSpec& spec,
                                                        absl::string_view where);
  ~MatmulLt();
  MatmulLt(const MatmulLt&) = delete;
  MatmulLt& operator=(const MatmulLt&) = delete;

  /// Device workspace run() needs (the algorithm's; cuBLAS's when it runs), 256-byte
  /// aligned.
  int64_t workspaceBytes() const { return workspace_bytes_; }

  /// What runs the product (describeGemm names it: a cuBLASLt heuristic result, or plain
  /// cuBLAS, here cublasGemmStridedBatchedEx).
  const GemmCandidate& choice() const { return choice_; }

  /// Enqueues c = scale * op(a) op(b) (+ bias) on `stream`. Pointers must be 256-byte
  /// aligned (as the arena and cudaMalloc give), which the algorithm chosen assumes.
  absl::Status run(const BlasHandles& handles, const void* a, const void* b, const void* bias,
                   void* c, void* workspace, cudaStream_t stream) const;

  const MatmulLtSpec& spec() const { return spec_; }

 private:
  class Trials;  // GemmTrials on scratch matrices (matmul_lt.cc)

  MatmulLt(const MatmulLtSpec& spec, absl::string_view where) : spec_(spec), where_(where) {}
  absl::Status build(const BlasHandles& handles);
  /// The product by candidate `how` (an Lt one runs `algo`), `workspace_bytes` given.
  absl::Status enqueue(const BlasHandles& handles, const GemmCandidate& how,
                       const cublasLtMatmulAlgo_t* algo, const void* a, const void* b,
                       const void* bias, void* c, void* workspace, int64_t workspace_bytes,
                       cudaStream_t stream) const;

  MatmulLtSpec spec_;
  std::string where_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, d_layout_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  GemmCandidate choice_;
  int64_t workspace_bytes_ = 0;
};

}  // namespace tandem::backend::cuda
