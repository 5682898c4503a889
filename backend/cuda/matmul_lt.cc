#include "backend/cuda/matmul_lt.h"

#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/linear_launch.h"
#include "backend/cuda/matmul_plan.h"

namespace tandem::backend::cuda {
namespace {

// The most workspace the heuristic may pick an algorithm for (NVIDIA recommends 32 MiB on
// Hopper), the workspace given to plain cuBLAS, and the alignment every pointer has.
constexpr uint64_t kMaxWorkspace = uint64_t{32} << 20;
constexpr int64_t kCublasWorkspace = int64_t{32} << 20;
constexpr int64_t kAlign = 256;

cudaDataType_t cudaType(ir::DType t) { return t == ir::DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }
int64_t bytesOf(ir::DType t) { return t == ir::DType::kBF16 ? 2 : 4; }
int64_t alignUp(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

// Scratch A, B, C and bias of the product's sizes (zeros) on a stream of their own, a
// workspace that grows to what a candidate needs; freed when the choice is made.
class MatmulLt::Trials final : public GemmTrials {
 public:
  Trials(const MatmulLt& m, const BlasHandles& h) : m_(m), h_(h) {}
  ~Trials() override {
    for (void* p : {a_, b_, c_, bias_, ws_})
      if (p != nullptr) cudaFree(p);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    (void)cudaGetLastError();  // a refused trial is not a later kernel's error
  }
  const cublasLtMatmulAlgo_t& algo(int lt) const { return results_[static_cast<size_t>(lt)].algo; }

  absl::StatusOr<std::vector<GemmCandidate>> heuristics() override {
    cublasLtMatmulPreference_t pref = nullptr;
    CUDA_TRY(m_.where_, cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t max_ws = kMaxWorkspace;
    absl::Status s =
        check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &max_ws, sizeof max_ws),
              "cublasLtMatmulPreferenceSetAttribute", m_.where_);
    results_.assign(kLtCandidates, cublasLtMatmulHeuristicResult_t{});
    int found = 0;
    cublasStatus_t listed = CUBLAS_STATUS_SUCCESS;
    if (s.ok())
      listed = cublasLtMatmulAlgoGetHeuristic(h_.lt, m_.desc_, m_.a_layout_, m_.b_layout_,
                                              m_.d_layout_, m_.d_layout_, pref, kLtCandidates,
                                              results_.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    RETURN_IF_ERROR(s);
    // NOT_SUPPORTED: cuBLASLt has nothing for this product (plain cuBLAS may).
    if (listed == CUBLAS_STATUS_NOT_SUPPORTED) return usable_;
    CUDA_TRY(m_.where_, listed);
    for (int i = 0; i < found && i < kLtCandidates; ++i) {
      const cublasLtMatmulHeuristicResult_t& r = results_[static_cast<size_t>(i)];
      if (r.state == CUBLAS_STATUS_SUCCESS)
        usable_.push_back({i, alignUp(static_cast<int64_t>(r.workspaceSize))});
    }
    return usable_;
  }

  absl::Status tryRun(const GemmCandidate& c) override {
    RETURN_IF_ERROR(prepare());
    const int64_t ws_bytes = c.cublas() ? kCublasWorkspace : c.workspace;
    if (ws_bytes > ws_bytes_) {
      if (ws_ != nullptr) CUDA_TRY(m_.where_, cudaFree(ws_));
      ws_ = nullptr;
      ws_bytes_ = 0;
      CUDA_TRY(m_.where_, cudaMalloc(&ws_, static_cast<size_t>(ws_bytes)));
      ws_bytes_ = ws_bytes;
    }
    RETURN_IF_ERROR(m_.enqueue(h_, c, c.cublas() ? nullptr : &algo(c.lt), a_, b_, bias_, c_,
                               ws_bytes > 0 ? ws_ : nullptr, ws_bytes, stream_));
    // A launch that fails on the GPU, not at the call, is a refusal too.
    return check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize",
                 "after the product on scratch matrices");
  }

 private:
  absl::Status prepare() {
    if (stream_ != nullptr) return absl::OkStatus();
    CUDA_TRY(m_.where_, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const MatmulShape& s = m_.spec_.shape;
    const int64_t ab = bytesOf(m_.spec_.ab), c = bytesOf(m_.spec_.c);
    std::vector<std::pair<void**, int64_t>> buffers = {{&a_, s.aBatch() * s.m * s.k * ab},
                                                       {&b_, s.bBatch() * s.k * s.n * ab},
                                                       {&c_, s.batch * s.m * s.n * c}};
    if (m_.spec_.bias) buffers.push_back({&bias_, s.n * c});
    for (auto [ptr, bytes] : buffers) {
      CUDA_TRY(m_.where_, cudaMalloc(ptr, static_cast<size_t>(bytes)));
      CUDA_TRY(m_.where_, cudaMemsetAsync(*ptr, 0, static_cast<size_t>(bytes), stream_));
    }
    CUDA_TRY(m_.where_, cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  const MatmulLt& m_;
  BlasHandles h_;
  std::vector<cublasLtMatmulHeuristicResult_t> results_;  // cuBLASLt's, as listed
  std::vector<GemmCandidate> usable_;                     // those whose state is success
  cudaStream_t stream_ = nullptr;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr, *bias_ = nullptr, *ws_ = nullptr;
  int64_t ws_bytes_ = 0;
};

absl::StatusOr<std::unique_ptr<MatmulLt>> MatmulLt::make(const BlasHandles& handles,
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
  // cublasGemmStridedBatchedEx, the fallback, counts in int.
  for (int64_t d : {s.batch, s.m, s.n, s.k})
    if (d > INT_MAX)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": matmul ", describe(s), " has a dimension beyond ", INT_MAX));
  std::unique_ptr<MatmulLt> m(new MatmulLt(spec, where));
  RETURN_IF_ERROR(m->build(handles));
  return m;
}

MatmulLt::~MatmulLt() {
  if (d_layout_ != nullptr) cublasLtMatrixLayoutDestroy(d_layout_);
  if (b_layout_ != nullptr) cublasLtMatrixLayoutDestroy(b_layout_);
  if (a_layout_ != nullptr) cublasLtMatrixLayoutDestroy(a_layout_);
  if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
}

absl::Status MatmulLt::build(const BlasHandles& handles) {
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

  Trials trials(*this, handles);
  absl::StatusOr<GemmCandidate> choice = chooseRunnableGemm(trials);
  if (!choice.ok())
    return absl::Status(
        choice.status().code(),
        absl::StrCat(where_, ": matmul ", describe(spec_.shape), " in ", ir::dtypeName(spec_.ab),
                     spec_.bias ? " with bias" : "", ": ", choice.status().message()));
  choice_ = *choice;
  if (!choice_.cublas()) algo_ = trials.algo(choice_.lt);
  workspace_bytes_ = choice_.cublas() ? kCublasWorkspace : choice_.workspace;
  return absl::OkStatus();
}

absl::Status MatmulLt::run(const BlasHandles& handles, const void* a, const void* b,
                           const void* bias, void* c, void* workspace, cudaStream_t stream) const {
  for (const void* ptr : {a, b, static_cast<const void*>(c)})
    if (reinterpret_cast<uintptr_t>(ptr) % kAlign != 0)
      return absl::InternalError(absl::StrCat(where_, ": an operand of matmul ",
                                              describe(spec_.shape), " is not ", kAlign,
                                              "-byte aligned, as the algorithm chosen assumes"));
  return enqueue(handles, choice_, &algo_, a, b, bias, c, workspace, workspace_bytes_, stream);
}

absl::Status MatmulLt::enqueue(const BlasHandles& handles, const GemmCandidate& how,
                               const cublasLtMatmulAlgo_t* algo, const void* a, const void* b,
                               const void* bias, void* c, void* workspace, int64_t workspace_bytes,
                               cudaStream_t stream) const {
  const MatmulLtPlan p = matmulLtPlan(spec_.shape);
  const float alpha = spec_.scale;
  // Our A is the libraries' B and our B their A (matmul_plan.h).
  if (!how.cublas()) {
    if (spec_.bias) {
      // Set per launch (cheap): the bias pointer is the launch's, not the build's.
      CUDA_TRY(where_, cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &bias, sizeof bias));
    }
    const float beta = 0.0f;
    CUDA_TRY(where_, cublasLtMatmul(handles.lt, desc_, &alpha, b, a_layout_, a, b_layout_, &beta, c,
                                    d_layout_, c, d_layout_, algo, workspace,
                                    static_cast<size_t>(workspace_bytes), stream));
    return absl::OkStatus();
  }
  // Plain cuBLAS has no bias epilogue: the bias goes into every row of C first, and the
  // product is added to it (beta = 1), as the linear kernels' fallback does.
  const MatmulShape& s = spec_.shape;
  if (spec_.bias) {
    if (spec_.c == ir::DType::kBF16)
      launchBroadcastRows(static_cast<const uint16_t*>(bias), static_cast<uint16_t*>(c),
                          s.batch * s.m, s.n, stream);
    else
      launchBroadcastRows(static_cast<const float*>(bias), static_cast<float*>(c), s.batch * s.m,
                          s.n, stream);
    CUDA_TRY(where_, cudaGetLastError());
  }
  const float beta = spec_.bias ? 1.0f : 0.0f;
  const cublasComputeType_t compute = spec_.ab == ir::DType::kF32 && spec_.allow_tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  const cudaDataType_t ab = cudaType(spec_.ab);
  auto i = [](int64_t v) { return static_cast<int>(v); };  // make() checked the range
  CUDA_TRY(where_, cublasSetStream(handles.blas, stream));
  CUDA_TRY(where_,
           cublasSetWorkspace(handles.blas, workspace, static_cast<size_t>(workspace_bytes)));
  CUDA_TRY(where_,
           cublasGemmStridedBatchedEx(handles.blas, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, i(p.m), i(p.n), i(p.k),
                                      &alpha, b, ab, i(p.lda), p.stride_a, a, ab, i(p.ldb),
                                      p.stride_b, &beta, c, cudaType(spec_.c), i(p.ldd), p.stride_d,
                                      i(p.batch), compute, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

}  // namespace tandem::backend::cuda
