#include "backend/cuda/matmul_lt.h"

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/matmul_plan.h"

namespace tandem::backend::cuda {
namespace {

// The most workspace the heuristic may pick an algorithm for (NVIDIA recommends 32 MiB on
// Hopper), and the alignment it assumes of every pointer.
constexpr uint64_t kMaxWorkspace = uint64_t{32} << 20;
constexpr uintptr_t kAlign = 256;

cudaDataType_t cudaType(ir::DType t) { return t == ir::DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

}  // namespace

absl::StatusOr<std::unique_ptr<MatmulLt>> MatmulLt::make(cublasLtHandle_t handle,
                                                         const MatmulLtSpec& spec,
                                                         absl::string_view where) {
  const MatmulShape& s = spec.shape;
  if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": matmul ", describe(s), " has an empty dimension"));
  for (ir::DType t : {spec.ab, spec.c})
    if (t != ir::DType::kF32 && t != ir::DType::kBF16)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the CUDA matmul takes f32 or bf16 operands, not ", ir::dtypeName(t)));
  std::unique_ptr<MatmulLt> m(new MatmulLt(spec, where));
  RETURN_IF_ERROR(m->build(handle));
  return m;
}

MatmulLt::~MatmulLt() {
  if (d_layout_ != nullptr) cublasLtMatrixLayoutDestroy(d_layout_);
  if (b_layout_ != nullptr) cublasLtMatrixLayoutDestroy(b_layout_);
  if (a_layout_ != nullptr) cublasLtMatrixLayoutDestroy(a_layout_);
  if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
}

absl::Status MatmulLt::build(cublasLtHandle_t handle) {
  const MatmulLtPlan p = matmulLtPlan(spec_.shape);
  const cublasComputeType_t compute = spec_.ab == ir::DType::kF32 && spec_.allow_tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  CUDA_TRY(where_, cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
  const int32_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUDA_TRY(where_,
           cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUDA_TRY(where_,
           cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (spec_.bias) {
    // One bias value per row of the column-major D: per column of our row-major C.
    const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = cudaType(spec_.c);
    CUDA_TRY(where_, cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                    sizeof epilogue));
    CUDA_TRY(where_, cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                    &bias_type, sizeof bias_type));
  }
  auto layout = [&](cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols,
                    int64_t ld, int64_t stride) -> absl::Status {
    CUDA_TRY(where_, cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
    if (p.batch > 1) {
      // A broadcast operand has stride 0: every batch entry reads the same matrix.
      const int32_t count = static_cast<int32_t>(p.batch);
      CUDA_TRY(where_, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                        &count, sizeof count));
      CUDA_TRY(where_,
               cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride));
    }
    return absl::OkStatus();
  };
  const cudaDataType_t ab = cudaType(spec_.ab);
  RETURN_IF_ERROR(layout(&a_layout_, ab, p.aRows(), p.aCols(), p.lda, p.stride_a));
  RETURN_IF_ERROR(layout(&b_layout_, ab, p.bRows(), p.bCols(), p.ldb, p.stride_b));
  RETURN_IF_ERROR(layout(&d_layout_, cudaType(spec_.c), p.m, p.n, p.ldd, p.stride_d));

  cublasLtMatmulPreference_t pref = nullptr;
  CUDA_TRY(where_, cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_ws = kMaxWorkspace;
  absl::Status s =
      check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &max_ws, sizeof max_ws),
            "cublasLtMatmulPreferenceSetAttribute", where_);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s.ok())
    s = check(cublasLtMatmulAlgoGetHeuristic(handle, desc_, a_layout_, b_layout_, d_layout_,
                                             d_layout_, pref, 1, &result, &found),
              "cublasLtMatmulAlgoGetHeuristic", where_);
  cublasLtMatmulPreferenceDestroy(pref);
  RETURN_IF_ERROR(s);
  if (found == 0)
    return absl::UnimplementedError(
        absl::StrCat(where_, ": cuBLASLt has no algorithm for matmul ", describe(spec_.shape),
                     " in ", ir::dtypeName(spec_.ab), spec_.bias ? " with bias" : ""));
  algo_ = result.algo;
  workspace_bytes_ = static_cast<int64_t>((result.workspaceSize + kAlign - 1) / kAlign * kAlign);
  return absl::OkStatus();
}

absl::Status MatmulLt::run(cublasLtHandle_t handle, const void* a, const void* b, const void* bias,
                           void* c, void* workspace, cudaStream_t stream) const {
  for (const void* ptr : {a, b, static_cast<const void*>(c)})
    if (reinterpret_cast<uintptr_t>(ptr) % kAlign != 0)
      return absl::InternalError(absl::StrCat(where_, ": an operand of matmul ",
                                              describe(spec_.shape), " is not ", kAlign,
                                              "-byte aligned, as the cuBLASLt algorithm assumes"));
  if (spec_.bias) {
    // Set per launch (cheap): the bias pointer is the launch's, not the build's.
    CUDA_TRY(where_, cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof bias));
  }
  // Our A is cuBLASLt's B and our B its A (matmul_plan.h).
  const float alpha = spec_.scale, beta = 0.0f;
  CUDA_TRY(where_, cublasLtMatmul(handle, desc_, &alpha, b, a_layout_, a, b_layout_, &beta, c,
                                  d_layout_, c, d_layout_, &algo_, workspace,
                                  static_cast<size_t>(workspace_bytes_), stream));
  return absl::OkStatus();
}

}  // namespace tandem::backend::cuda
