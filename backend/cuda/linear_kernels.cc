// linear and its backward ops as one cuBLASLt matmul each (row-major products mapped onto
// column-major ones: linear_plan.h). Descriptors, layouts and the algorithm are made once,
// when the kernel is made; a launch only enqueues. The algorithm is the first of
// cuBLASLt's heuristic results that runs on scratch matrices, or plain cuBLAS where none
// does (gemm_choice.h). The forward bias is cuBLASLt's bias epilogue (on the cuBLAS path:
// the bias copied into every row of the output by an own kernel, then added through
// beta = 1, the same f32 sum rounded once); the bias gradient is an own kernel (column
// sums of dy in a fixed order, so runs are bit-identical). Under mixed precision (bf16
// activations, f32 master weights) the weight and bias are converted to bf16 in the
// workspace first: cuBLASLt wants A and B of one type, and its bias the output's type.

#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/elementwise_launch.h"
#include "backend/cuda/gemm_choice.h"
#include "backend/cuda/linear_launch.h"
#include "backend/cuda/linear_plan.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

// The most workspace cuBLASLt may ask for (NVIDIA recommends 32 MiB on Hopper); what it
// takes is what the chosen algorithm needs, often nothing. Plain cuBLAS gets as much of
// ours (cublasSetWorkspace), so that it never allocates its own during a recording.
constexpr uint64_t kMaxLtWorkspace = uint64_t{32} << 20;
constexpr int64_t kCublasWorkspace = int64_t{32} << 20;
// cuBLASLt's heuristic assumes 256-byte aligned pointers unless told otherwise; the
// memory plan, cudaMalloc and the workspace carving below all give that.
constexpr int64_t kAlign = 256;

int64_t alignUp(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

cudaDataType_t cudaType(ir::DType t) { return t == ir::DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

/// What one linear-family node asks of the GEMM kernel.
struct GemmSpec {
  GemmPlan plan;
  ir::DType act;              // A and B as multiplied (and D): the activations' dtype
  bool convert_a = false;     // operand A is f32 master weights under bf16 activations
  int bias = -1;              // operand index of the forward bias, or -1
  bool convert_bias = false;  // the bias is f32 under a bf16 output
  bool bias_grad = false;     // result 1 = column sums of operand 0 (dy[N,O])
};

class GemmKernel final : public CudaKernel {
 public:
  static KernelOr create(const KernelInit& init, const GemmSpec& spec) {
    std::unique_ptr<GemmKernel> k(new GemmKernel(init.ctx, spec));
    k->setDescription(init.node.describe());
    RETURN_IF_ERROR(k->build(init.node));
    return std::unique_ptr<CudaKernel>(std::move(k));
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    const GemmPlan& p = spec_.plan;
    ASSIGN_OR_RETURN(void* ws, workspace());
    char* scratch = static_cast<char*>(ws);
    const void* a = in[static_cast<size_t>(p.a)].data;
    if (spec_.convert_a) {
      auto* a16 = reinterpret_cast<uint16_t*>(scratch + a_offset_);
      launchCast(static_cast<const float*>(a), a16, p.m * p.k, stream);
      a = a16;
    }
    const void* b = in[static_cast<size_t>(p.b)].data;
    void* d = out[0].data;
    RETURN_IF_ERROR(checkAligned(a, "A"));
    RETURN_IF_ERROR(checkAligned(b, "B"));
    RETURN_IF_ERROR(checkAligned(d, "D"));
    const void* bias = nullptr;
    if (spec_.bias >= 0) {
      bias = in[static_cast<size_t>(spec_.bias)].data;
      if (spec_.convert_bias) {
        auto* b16 = reinterpret_cast<uint16_t*>(scratch + bias_offset_);
        launchCast(static_cast<const float*>(bias), b16, p.m, stream);
        bias = b16;
      }
      RETURN_IF_ERROR(checkAligned(bias, "bias"));
    }
    void* lt_ws = lt_bytes_ > 0 ? scratch + lt_offset_ : nullptr;
    if (choice_.cublas()) {
      RETURN_IF_ERROR(enqueueCublas(a, b, bias, d, lt_ws, stream));
    } else {
      if (bias != nullptr)  // read when the matmul is enqueued: set per launch, from the views
        CUDA_TRY(what(), cublasLtMatmulDescSetAttribute(
                             desc_.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
      const float alpha = 1.0f, beta = 0.0f;
      CUDA_TRY(what(),
               cublasLtMatmul(ctx().cublasLt(), desc_.get(), &alpha, a, a_layout_.get(), b,
                              b_layout_.get(), &beta, d, d_layout_.get(), d, d_layout_.get(),
                              &algo_, lt_ws, static_cast<size_t>(lt_bytes_), stream));
    }
    if (spec_.bias_grad) {
      // dy[N,O] is operand 0 = B; db[O] is result 1 (both in the activations' dtype).
      const TensorView& dy = in[0];
      const int64_t rows = dy.dim(0), cols = dy.dim(1);
      if (spec_.act == ir::DType::kBF16)
        launchColumnSums(static_cast<const uint16_t*>(dy.data), static_cast<uint16_t*>(out[1].data),
                         rows, cols, stream);
      else
        launchColumnSums(dy.f32(), out[1].f32(), rows, cols, stream);
    }
    return absl::OkStatus();
  }

 private:
  GemmKernel(CudaContext& ctx, const GemmSpec& spec) : CudaKernel(ctx), spec_(spec) {}

  absl::Status checkAligned(const void* p, const char* which) const {
    if (reinterpret_cast<uintptr_t>(p) % kAlign == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(what(), ": matrix ", which, " at ",
                                            reinterpret_cast<uintptr_t>(p), " is not ", kAlign,
                                            "-byte aligned, as the cuBLASLt algorithm chosen at "
                                            "load time assumes"));
  }

  absl::Status build(const ir::Node& n) {
    const GemmPlan& p = spec_.plan;
    if (p.m <= 0 || p.n <= 0 || p.k <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat(what(), ": empty matrix product (", p.m, " x ", p.k, " by ", p.k, " x ", p.n,
                       "): the CUDA kernel needs every dimension at least 1"));
    // cuBLAS's fallback takes int sizes.
    for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldd})
      if (v > std::numeric_limits<int>::max())
        return absl::InvalidArgumentError(absl::StrCat(what(), ": a matrix dimension of ", v,
                                                       " exceeds what cuBLAS takes (an int)"));
    const cudaDataType_t ab = cudaType(spec_.act);
    cublasLtMatmulDesc_t desc = nullptr;
    CUDA_TRY(what(), cublasLtMatmulDescCreate(&desc, computeType(), CUDA_R_32F));
    desc_.reset(desc);
    const int32_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUDA_TRY(what(),
             cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUDA_TRY(what(),
             cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (spec_.bias >= 0) {
      const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const int32_t bias_type = ab;  // the output's type, which the epilogue wants
      CUDA_TRY(what(), cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                      &epilogue, sizeof epilogue));
      CUDA_TRY(what(), cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                      &bias_type, sizeof bias_type));
    }
    cublasLtMatrixLayout_t layout = nullptr;
    CUDA_TRY(what(), cublasLtMatrixLayoutCreate(&layout, ab, static_cast<uint64_t>(p.aRows()),
                                                static_cast<uint64_t>(p.aCols()), p.lda));
    a_layout_.reset(layout);
    CUDA_TRY(what(), cublasLtMatrixLayoutCreate(&layout, ab, static_cast<uint64_t>(p.bRows()),
                                                static_cast<uint64_t>(p.bCols()), p.ldb));
    b_layout_.reset(layout);
    CUDA_TRY(what(), cublasLtMatrixLayoutCreate(&layout, ab, static_cast<uint64_t>(p.m),
                                                static_cast<uint64_t>(p.n), p.ldd));
    d_layout_.reset(layout);

    LtTrials trials(*this);
    absl::StatusOr<GemmCandidate> choice = chooseRunnableGemm(trials);
    if (!choice.ok())
      return absl::Status(
          choice.status().code(),
          absl::StrCat(what(), " (", p.m, " x ", p.n, " x ", p.k, ", ", ir::dtypeName(spec_.act),
                       spec_.bias >= 0 ? ", bias epilogue" : "", "): ", choice.status().message()));
    choice_ = *choice;
    if (choice_.cublas()) {
      lt_bytes_ = kCublasWorkspace;
    } else {
      algo_ = trials.result(choice_.lt).algo;
      lt_bytes_ = choice_.workspace;
    }

    // Workspace: [A in bf16][bias in bf16][cuBLASLt's], each 256-byte aligned.
    int64_t at = 0;
    if (spec_.convert_a) {
      a_offset_ = at;
      at += alignUp(p.m * p.k * 2);
    }
    if (spec_.convert_bias) {
      bias_offset_ = at;
      at += alignUp(p.m * 2);
    }
    lt_offset_ = at;
    workspace_bytes_ = at + lt_bytes_;
    return needWorkspace(n, workspace_bytes_);
  }

  /// The product through plain cuBLAS (the fallback): the bias first copied into every row
  /// of D, then D = A B + D.
  absl::Status enqueueCublas(const void* a, const void* b, const void* bias, void* d, void* ws,
                             cudaStream_t stream) const {
    const GemmPlan& p = spec_.plan;
    if (bias != nullptr) {
      if (spec_.act == ir::DType::kBF16)
        launchBroadcastRows(static_cast<const uint16_t*>(bias), static_cast<uint16_t*>(d), p.n, p.m,
                            stream);
      else
        launchBroadcastRows(static_cast<const float*>(bias), static_cast<float*>(d), p.n, p.m,
                            stream);
    }
    cublasHandle_t h = ctx().cublas();
    CUDA_TRY(what(), cublasSetStream(h, stream));
    CUDA_TRY(what(), cublasSetWorkspace(h, ws, static_cast<size_t>(lt_bytes_)));
    return check(callGemmEx(h, a, b, d, bias != nullptr), "cublasGemmEx", what());
  }

  /// cublasGemmEx of the plan on A, B into D (+ D when `accumulate`).
  cublasStatus_t callGemmEx(cublasHandle_t h, const void* a, const void* b, void* d,
                            bool accumulate) const {
    const GemmPlan& p = spec_.plan;
    const cudaDataType_t t = cudaType(spec_.act);
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    auto i = [](int64_t v) { return static_cast<int>(v); };  // build() checked the range
    return cublasGemmEx(h, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                        p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, i(p.m), i(p.n), i(p.k), &alpha, a, t,
                        i(p.lda), b, t, i(p.ldb), &beta, d, t, i(p.ldd), computeType(),
                        CUBLAS_GEMM_DEFAULT);
  }

  /// f32 products may round their inputs to TF32 unless --no-tf32; bf16 products
  /// accumulate in f32 either way.
  cublasComputeType_t computeType() const {
    return spec_.act == ir::DType::kF32 && ctx().allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                             : CUBLAS_COMPUTE_32F;
  }

  /// GemmTrials over cuBLASLt and cuBLAS: this kernel's descriptors, and scratch A, B, D
  /// and bias of its sizes (zeros) on a stream of their own, freed once the choice is made.
  class LtTrials final : public GemmTrials {
   public:
    explicit LtTrials(const GemmKernel& k) : k_(k) {}
    ~LtTrials() override {
      for (void* p : {a_, b_, d_, bias_, ws_})
        if (p != nullptr) cudaFree(p);
      if (stream_ != nullptr) cudaStreamDestroy(stream_);
      (void)cudaGetLastError();  // a refused trial is not a later kernel's error
    }
    const cublasLtMatmulHeuristicResult_t& result(int i) const {
      return results_[static_cast<size_t>(i)];
    }

    absl::StatusOr<std::vector<GemmCandidate>> heuristics() override {
      cublasLtMatmulPreference_t pref = nullptr;
      CUDA_TRY(k_.what(), cublasLtMatmulPreferenceCreate(&pref));
      Preference preference(pref);
      const uint64_t max_ws = kMaxLtWorkspace;
      CUDA_TRY(k_.what(),
               cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &max_ws, sizeof max_ws));
      results_.assign(kLtCandidates, cublasLtMatmulHeuristicResult_t{});
      int found = 0;
      const cublasStatus_t listed = cublasLtMatmulAlgoGetHeuristic(
          k_.ctx().cublasLt(), k_.desc_.get(), k_.a_layout_.get(), k_.b_layout_.get(),
          k_.d_layout_.get(), k_.d_layout_.get(), pref, kLtCandidates, results_.data(), &found);
      std::vector<GemmCandidate> out;
      // NOT_SUPPORTED: cuBLASLt has nothing for this product (plain cuBLAS may).
      if (listed == CUBLAS_STATUS_NOT_SUPPORTED) return out;
      CUDA_TRY(k_.what(), listed);
      for (int i = 0; i < found && i < kLtCandidates; ++i)
        if (results_[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
          out.push_back({i, static_cast<int64_t>(results_[static_cast<size_t>(i)].workspaceSize)});
      return out;
    }

    absl::Status tryRun(const GemmCandidate& c) override {
      RETURN_IF_ERROR(prepare());
      const int64_t ws_bytes = c.cublas() ? kCublasWorkspace : c.workspace;
      if (ws_bytes > ws_bytes_) {
        if (ws_ != nullptr) CUDA_TRY(k_.what(), cudaFree(ws_));
        ws_ = nullptr;
        ws_bytes_ = 0;
        CUDA_TRY(k_.what(), cudaMalloc(&ws_, static_cast<size_t>(ws_bytes)));
        ws_bytes_ = ws_bytes;
      }
      if (c.cublas()) {
        cublasHandle_t h = k_.ctx().cublas();
        CUDA_TRY(k_.what(), cublasSetStream(h, stream_));
        CUDA_TRY(k_.what(), cublasSetWorkspace(h, ws_, static_cast<size_t>(ws_bytes)));
        RETURN_IF_ERROR(check(k_.callGemmEx(h, a_, b_, d_, bias_ != nullptr), "cublasGemmEx",
                              "on scratch matrices"));
      } else {
        if (bias_ != nullptr)
          CUDA_TRY(k_.what(),
                   cublasLtMatmulDescSetAttribute(k_.desc_.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &bias_, sizeof bias_));
        const float alpha = 1.0f, beta = 0.0f;
        RETURN_IF_ERROR(check(
            cublasLtMatmul(k_.ctx().cublasLt(), k_.desc_.get(), &alpha, a_, k_.a_layout_.get(), b_,
                           k_.b_layout_.get(), &beta, d_, k_.d_layout_.get(), d_,
                           k_.d_layout_.get(), &result(c.lt).algo, ws_bytes > 0 ? ws_ : nullptr,
                           static_cast<size_t>(ws_bytes), stream_),
            "cublasLtMatmul", "on scratch matrices"));
      }
      // A launch that fails on the GPU, not at the call, is a refusal too.
      return check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize",
                   "after the call on scratch matrices");
    }

   private:
    absl::Status prepare() {
      if (stream_ != nullptr) return absl::OkStatus();
      CUDA_TRY(k_.what(), cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      const GemmPlan& p = k_.spec_.plan;
      const int64_t elem = k_.spec_.act == ir::DType::kBF16 ? 2 : 4;
      std::vector<std::pair<void**, int64_t>> buffers = {
          {&a_, p.m * p.k}, {&b_, p.k * p.n}, {&d_, p.m * p.n}};
      if (k_.spec_.bias >= 0) buffers.push_back({&bias_, p.m});
      for (auto [ptr, count] : buffers) {
        CUDA_TRY(k_.what(), cudaMalloc(ptr, static_cast<size_t>(count * elem)));
        CUDA_TRY(k_.what(), cudaMemsetAsync(*ptr, 0, static_cast<size_t>(count * elem), stream_));
      }
      CUDA_TRY(k_.what(), cudaStreamSynchronize(stream_));
      return absl::OkStatus();
    }

    const GemmKernel& k_;
    std::vector<cublasLtMatmulHeuristicResult_t> results_;
    cudaStream_t stream_ = nullptr;
    void *a_ = nullptr, *b_ = nullptr, *d_ = nullptr, *bias_ = nullptr, *ws_ = nullptr;
    int64_t ws_bytes_ = 0;
  };

  GemmSpec spec_;
  MatmulDesc desc_;
  Layout a_layout_, b_layout_, d_layout_;
  cublasLtMatmulAlgo_t algo_{};
  GemmCandidate choice_;
  int64_t a_offset_ = 0, bias_offset_ = 0, lt_offset_ = 0;
  int64_t lt_bytes_ = 0, workspace_bytes_ = 0;
};

/// The dtypes the CPU kernels accept: f32, or bf16 activations with bf16 or f32 weights.
absl::Status checkDTypes(const ir::Node& n, ir::DType act, ir::DType weight) {
  const bool ok = act == ir::DType::kF32 ? weight == ir::DType::kF32
                                         : act == ir::DType::kBF16 && (weight == ir::DType::kBF16 ||
                                                                       weight == ir::DType::kF32);
  if (ok) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(n.describe(), ": no CUDA kernel for ",
                                               ir::dtypeName(act), " activations with ",
                                               ir::dtypeName(weight), " weights"));
}

}  // namespace

// linear(x, w, b?) -> y = x w^T (+ b), in x's dtype.
KernelOr makeLinearKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType &x = n.operand(0)->type(), &w = n.operand(1)->type();
  RETURN_IF_ERROR(checkDTypes(n, x.dtype, w.dtype));
  GemmSpec spec{.plan = linearPlan(x.shape[0], x.shape[1], w.shape[0]), .act = x.dtype};
  spec.convert_a = w.dtype != x.dtype;
  if (n.numOperands() > 2) {
    spec.bias = 2;
    spec.convert_bias = n.operand(2)->type().dtype != x.dtype;
  }
  return GemmKernel::create(init, spec);
}

// linear_backward_data(dy, w) -> dx = dy w, in dy's dtype.
KernelOr makeLinearBackwardDataKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType &dy = n.operand(0)->type(), &w = n.operand(1)->type();
  RETURN_IF_ERROR(checkDTypes(n, dy.dtype, w.dtype));
  GemmSpec spec{.plan = linearBackwardDataPlan(dy.shape[0], w.shape[1], w.shape[0]),
                .act = dy.dtype};
  spec.convert_a = w.dtype != dy.dtype;
  return GemmKernel::create(init, spec);
}

// linear_backward_weight(dy, x){bias} -> dw = dy^T x (and db = column sums of dy), in the
// activations' dtype (bf16 gradients under mixed precision, as on CPU).
KernelOr makeLinearBackwardWeightKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType &dy = n.operand(0)->type(), &x = n.operand(1)->type();
  RETURN_IF_ERROR(checkDTypes(n, dy.dtype, x.dtype));
  if (dy.dtype != x.dtype)
    return absl::InvalidArgumentError(absl::StrCat(n.describe(), ": dy and x must have one dtype"));
  GemmSpec spec{.plan = linearBackwardWeightPlan(dy.shape[0], x.shape[1], dy.shape[1]),
                .act = dy.dtype};
  spec.bias_grad = ir::attr::bias(n);
  return GemmKernel::create(init, spec);
}

}  // namespace tandem::backend::cuda
