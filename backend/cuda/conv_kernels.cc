// Convolutions through cuDNN's legacy API: conv2d, its two backward ops, conv2d_stats and
// conv2d_bias_act. Descriptors, the algorithm and the workspace size are settled when the
// kernel is made (conv_descriptors.h has the pure rules); a launch only enqueues.
//
// The algorithm comes from cuDNN's heuristic list (cudnnGet*Algorithm_v7), or from its
// measurements (cudnnFind*AlgorithmEx) with --conv-algorithm measure: candidates are
// tried in order, a deterministic one first wherever cuDNN lists one (runs stay
// bit-identical), each once on scratch tensors of the convolution's sizes, and the first
// that runs is taken, as PyTorch does: cuDNN's list may name an algorithm that then refuses
// the call (FMA-only NHWC and the one-channel bf16 stem have few that run). The choice is
// made when the kernel is made, never during a step, and cached process-wide per shape,
// types, math mode, layout and GPU (conv_descriptors.h's chooseRunnableAlgo, algoCacheKey).
//
// Bias, residual and relu are an own epilogue kernel after the convolution (conv.cu), in
// the CPU's order of rounding; cudnnConvolutionBiasActivationForward would tie the
// algorithm to IMPLICIT_PRECOMP_GEMM without relu and take no f32 bias beside bf16 data.
// The bias gradient is an own kernel too (a fixed reduction order; it writes an f32
// gradient from bf16 dy, which cudnnConvolutionBackwardBias cannot).
//
// Mixed precision (bf16 activations, f32 master weights): cuDNN wants x, w and y of one
// type, so the weights are converted to bf16 in the workspace before each call, and the
// backward-filter pass writes a bf16 dw there that is widened to the f32 gradient the CPU
// backend returns (as PyTorch's autocast does: a bf16 weight gradient, cast to f32).
//
// Layouts (layout_plan.h): cuDNN runs in NHWC with a KRSC filter when the plan gives the
// x side (x, dx) or the y side (y, dy) NHWC, else in NCHW with KCRS. Channels-last filters
// beside channels-last data are what cuDNN's NHWC tensor-core kernels read (as PyTorch's
// channels_last and TensorFlow's NHWC paths pass them); an NCHW filter there would be
// transposed by cuDNN inside or refused. Variables stay KCRS (checkpoints, SGD and the CPU
// backend see one layout): the kernel reorders the filter into KRSC in its workspace,
// in the same pass that converts f32 master weights to bf16, and the backward-filter pass
// writes a KRSC dw there that one pass reorders (and widens) into the KCRS gradient. A
// side the plan keeps NCHW beside an NHWC one (the stem convolution reads the NCHW image)
// is transposed through the workspace too; cuDNN's descriptors always share one format.

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/conv_descriptors.h"
#include "backend/cuda/conv_launch.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/elementwise_launch.h"
#include "backend/cuda/norm_launch.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

// Workspace carving: cuDNN's own workspace first, converted tensors after it, each at a
// 256-byte boundary (what cudaMalloc gives and cuDNN's vectorized kernels like).
constexpr int64_t kAlign = 256;
int64_t alignUp(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

/// Algorithm choices by algoCacheKey, for every kernel of the process.
class AlgoCache {
 public:
  static AlgoCache& get() {
    static AlgoCache* cache = new AlgoCache;  // never destroyed: kernels outlive statics
    return *cache;
  }
  bool find(const std::string& key, AlgoChoice* choice) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    *choice = it->second;
    return true;
  }
  void put(const std::string& key, AlgoChoice choice) {
    std::lock_guard<std::mutex> lock(mu_);
    map_.emplace(key, choice);
  }

 private:
  std::mutex mu_;
  std::map<std::string, AlgoChoice> map_;
};

/// The cuDNN descriptors of one convolution, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr;  // x or dx [n, c, h, w]
  cudnnTensorDescriptor_t y = nullptr;  // y or dy [n, o, oh, ow]
  cudnnFilterDescriptor_t w = nullptr;  // w or dw [o, c, k, k]
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
  }
};

/// What one node of the family asks: the pass and the extras around the cuDNN call.
struct ConvSpec {
  ConvPass pass;
  size_t x_index, w_index;  // operands giving x's and w's types
  bool bias = false;        // forward: operand 2 is added; backward filter: result 1 = db
  bool residual = false;    // forward: operand 3 is added after the bias
  bool relu = false;
  bool stats = false;  // forward: result 1 = per-channel count, sum, sum of squares
};

class ConvKernel final : public CudaKernel {
 public:
  static KernelOr create(const KernelInit& init, const ConvSpec& spec) {
    std::unique_ptr<ConvKernel> k(new ConvKernel(init.ctx, spec));
    k->setDescription(init.node.describe());
    k->nhwc_plan_ = init.nhwc;
    RETURN_IF_ERROR(k->build(init.node));
    return std::unique_ptr<CudaKernel>(std::move(k));
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    cudnnHandle_t h = ctx().cudnn();
    CUDA_TRY(what(), cudnnSetStream(h, stream));
    ASSIGN_OR_RETURN(void* ws, workspace());
    char* base = static_cast<char*>(ws);
    void* w_scratch = base + w_offset_;
    void* x_scratch = x_offset_ >= 0 ? base + x_offset_ : nullptr;
    void* y_scratch = y_offset_ >= 0 ? base + y_offset_ : nullptr;
    const float one = 1.0f, zero = 0.0f;
    switch (spec_.pass) {
      case ConvPass::kForward: {  // x, w, b?, residual? -> y, stats?
        const void* x = in[0].data;
        if (x_scratch != nullptr)
          x = toNhwc(in[0].data, x_scratch, g_.n, g_.c, g_.h * g_.w, stream);
        const void* w = filter(in[1], w_scratch, stream);
        void* y = y_scratch != nullptr ? y_scratch : out[0].data;
        CUDA_TRY(what(),
                 cudnnConvolutionForward(h, &one, d_.x, x, d_.w, w, d_.conv,
                                         static_cast<cudnnConvolutionFwdAlgo_t>(choice_.algo), ws,
                                         static_cast<size_t>(cudnn_bytes_), &zero, d_.y, y));
        if (y_scratch != nullptr) toNchw(y_scratch, out[0].data, g_.n, g_.o, g_.oh * g_.ow, stream);
        if (spec_.bias) epilogue(stream, in, out);
        if (spec_.stats) {
          const Planes p = yPlanes();
          launchChannelStats(out[0].data, bf16(), p.n, p.c, p.hw, static_cast<double*>(out[1].data),
                             stream);
        }
        return absl::OkStatus();
      }
      case ConvPass::kBackwardData: {  // dy, w, x -> dx
        const void* dy = in[0].data;
        if (y_scratch != nullptr)
          dy = toNhwc(in[0].data, y_scratch, g_.n, g_.o, g_.oh * g_.ow, stream);
        const void* w = filter(in[1], w_scratch, stream);
        void* dx = x_scratch != nullptr ? x_scratch : out[0].data;
        CUDA_TRY(what(), cudnnConvolutionBackwardData(
                             h, &one, d_.w, w, d_.y, dy, d_.conv,
                             static_cast<cudnnConvolutionBwdDataAlgo_t>(choice_.algo), ws,
                             static_cast<size_t>(cudnn_bytes_), &zero, d_.x, dx));
        if (x_scratch != nullptr) toNchw(x_scratch, out[0].data, g_.n, g_.c, g_.h * g_.w, stream);
        return absl::OkStatus();
      }
      case ConvPass::kBackwardFilter: {  // dy, x, w -> dw, db?
        const void* dy = in[0].data;
        if (y_scratch != nullptr)
          dy = toNhwc(in[0].data, y_scratch, g_.n, g_.o, g_.oh * g_.ow, stream);
        const void* x = in[1].data;
        if (x_scratch != nullptr)
          x = toNhwc(in[1].data, x_scratch, g_.n, g_.c, g_.h * g_.w, stream);
        const bool via_scratch = types_.widen_dw || types_.nhwc;
        void* dw = via_scratch ? w_scratch : out[0].data;
        CUDA_TRY(what(), cudnnConvolutionBackwardFilter(
                             h, &one, d_.x, x, d_.y, dy, d_.conv,
                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice_.algo), ws,
                             static_cast<size_t>(cudnn_bytes_), &zero, d_.w, dw));
        if (via_scratch) filterGradient(dw, out[0], stream);
        if (spec_.bias) biasGrad(stream, in[0], out[1]);
        return absl::OkStatus();
      }
    }
    return absl::InternalError(absl::StrCat(what(), ": unknown convolution pass"));
  }

 private:
  ConvKernel(CudaContext& ctx, const ConvSpec& spec) : CudaKernel(ctx), spec_(spec) {}

  bool bf16() const { return types_.act == ir::DType::kBF16; }

  absl::Status build(const ir::Node& n) {
    const ir::TensorType& x = n.operand(spec_.x_index)->type();
    const ir::TensorType& w = n.operand(spec_.w_index)->type();
    ASSIGN_OR_RETURN(
        g_, named(convGeometry(x, w, ir::attr::stride(n), ir::attr::pad(n), ir::attr::groups(n))));
    ASSIGN_OR_RETURN(types_, named(convTypes(x.dtype, w.dtype, ctx().allowTf32())));
    // Forward and backward data read the weights; backward filter writes their gradient.
    if (spec_.pass == ConvPass::kBackwardFilter)
      types_.convert_w = false;
    else
      types_.widen_dw = false;
    // y (forward) or dy (backward) as the IR has it: the geometry must agree.
    const ir::TensorType& y =
        spec_.pass == ConvPass::kForward ? n.result(0)->type() : n.operand(0)->type();
    if (y.shape != ir::Shape{g_.n, g_.o, g_.oh, g_.ow})
      return absl::InternalError(absl::StrCat(what(), ": the convolution's output ",
                                              ir::toString(y), " does not match its geometry"));
    if (spec_.bias && spec_.pass == ConvPass::kForward) bias_dtype_ = n.operand(2)->type().dtype;
    if (spec_.bias && spec_.pass == ConvPass::kBackwardFilter)
      bias_dtype_ = n.result(1)->type().dtype;
    // The plan's layouts of the x side (x, or backward data's dx) and the y side (y, dy;
    // conv2d_bias_act's residual shares y's).
    const ir::Value* x_side =
        spec_.pass == ConvPass::kBackwardData ? n.result(0) : n.operand(spec_.x_index);
    const ir::Value* y_side = spec_.pass == ConvPass::kForward ? n.result(0) : n.operand(0);
    x_nhwc_ = nhwc_plan_ != nullptr && nhwc_plan_->contains(x_side);
    y_nhwc_ = nhwc_plan_ != nullptr && nhwc_plan_->contains(y_side);
    types_.nhwc = x_nhwc_ || y_nhwc_;

    RETURN_IF_ERROR(makeDescriptors());
    // After cuDNN's workspace: the filter as cuDNN reads it (bf16 and/or KRSC) or the dw it
    // writes, then the side the plan keeps NCHW when cuDNN runs NHWC. Known before the
    // algorithm, so that cuDNN gets what the plan leaves.
    const int64_t elem = bf16() ? 2 : 4;
    const bool w_scratch = types_.convert_w || types_.widen_dw || types_.nhwc;
    int64_t extras = w_scratch ? alignUp(g_.o * g_.filterChannels() * g_.window() * elem) : 0;
    if (types_.nhwc && !x_nhwc_) {
      x_offset_ = extras;
      extras += alignUp(g_.n * g_.c * g_.h * g_.w * elem);
    }
    if (types_.nhwc && !y_nhwc_) {
      y_offset_ = extras;
      extras += alignUp(g_.n * g_.o * g_.oh * g_.ow * elem);
    }
    // Algorithms needing more than the plan leaves are passed over (a multiple of kAlign,
    // so that cuDNN's part rounded up still fits).
    const int64_t planned = plannedWorkspace(n);
    const int64_t cudnn_limit =
        planned < 0
            ? kMaxConvWorkspace
            : std::min(kMaxConvWorkspace, std::max<int64_t>(planned - extras, 0) / kAlign * kAlign);
    RETURN_IF_ERROR(chooseAlgorithm(cudnn_limit));
    CUDA_TRY(what(), cudnnSetConvolutionMathType(d_.conv, choice_.math));
    RETURN_IF_ERROR(queryWorkspace());
    w_offset_ = alignUp(cudnn_bytes_);
    if (x_offset_ >= 0) x_offset_ += w_offset_;
    if (y_offset_ >= 0) y_offset_ += w_offset_;
    total_bytes_ = w_offset_ + extras;
    return needWorkspace(n, total_bytes_);
  }

  /// `v`, or its error naming the node.
  template <typename T>
  absl::StatusOr<T> named(absl::StatusOr<T> v) const {
    if (v.ok()) return v;
    return absl::Status(v.status().code(), absl::StrCat(what(), ": ", v.status().message()));
  }

  absl::Status makeDescriptors() {
    auto i = [](int64_t v) { return static_cast<int>(v); };  // convGeometry checked the range
    CUDA_TRY(what(), cudnnCreateTensorDescriptor(&d_.x));
    CUDA_TRY(what(), cudnnCreateTensorDescriptor(&d_.y));
    CUDA_TRY(what(), cudnnCreateFilterDescriptor(&d_.w));
    CUDA_TRY(what(), cudnnCreateConvolutionDescriptor(&d_.conv));
    // The dimensions are given as N, C, H, W (K, C, R, S) in either format.
    const cudnnTensorFormat_t format = types_.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    CUDA_TRY(what(), cudnnSetTensor4dDescriptor(d_.x, format, types_.data, i(g_.n), i(g_.c),
                                                i(g_.h), i(g_.w)));
    CUDA_TRY(what(), cudnnSetTensor4dDescriptor(d_.y, format, types_.data, i(g_.n), i(g_.o),
                                                i(g_.oh), i(g_.ow)));
    CUDA_TRY(what(), cudnnSetFilter4dDescriptor(d_.w, types_.data, format, i(g_.o),
                                                i(g_.filterChannels()), i(g_.kh), i(g_.kw)));
    CUDA_TRY(what(), cudnnSetConvolution2dDescriptor(d_.conv, i(g_.pad_h), i(g_.pad_w),
                                                     i(g_.stride_h), i(g_.stride_w), 1, 1,
                                                     CUDNN_CROSS_CORRELATION, types_.compute));
    CUDA_TRY(what(), cudnnSetConvolutionGroupCount(d_.conv, i(g_.groups)));
    CUDA_TRY(what(), cudnnSetConvolutionMathType(d_.conv, types_.math));
    // cuDNN's own idea of the output must be the IR's (both round the extent down).
    int n = 0, c = 0, h = 0, w = 0;
    CUDA_TRY(what(), cudnnGetConvolution2dForwardOutputDim(d_.conv, d_.x, d_.w, &n, &c, &h, &w));
    if (n != g_.n || c != g_.o || h != g_.oh || w != g_.ow)
      return absl::InternalError(absl::StrCat(what(), ": cuDNN gives the output [", n, ",", c, ",",
                                              h, ",", w, "], the IR [", g_.n, ",", g_.o, ",", g_.oh,
                                              ",", g_.ow, "]"));
    return absl::OkStatus();
  }

  /// cuDNN's list for this pass (heuristic or measured), reduced to AlgoCandidates.
  template <typename Perf>
  static std::vector<AlgoCandidate> candidates(const std::vector<Perf>& perf, int returned) {
    std::vector<AlgoCandidate> out;
    for (int i = 0; i < returned && i < static_cast<int>(perf.size()); ++i) {
      const Perf& p = perf[static_cast<size_t>(i)];
      out.push_back({static_cast<int>(p.algo), p.status, p.determinism, p.mathType,
                     static_cast<int64_t>(p.memory)});
    }
    return out;
  }

  /// ConvAlgoTrials over cuDNN: the descriptors of this kernel, and scratch x, w and y of
  /// its sizes (zeros: cuDNN's choice never depends on the values) on a stream of its own,
  /// freed when the choice is made.
  class CudnnTrials final : public ConvAlgoTrials {
   public:
    explicit CudnnTrials(const ConvKernel& k) : k_(k) {}
    ~CudnnTrials() override {
      cudnnSetStream(k_.ctx().cudnn(), nullptr);  // the kernels set theirs at each launch
      for (void* p : {x_, w_, y_, ws_})
        if (p != nullptr) cudaFree(p);
      if (stream_ != nullptr) cudaStreamDestroy(stream_);
      (void)cudaGetLastError();  // a refused trial is not a later kernel's error
    }

    absl::StatusOr<std::vector<AlgoCandidate>> heuristics() override {
      cudnnHandle_t h = k_.ctx().cudnn();
      const Descriptors& d = k_.d_;
      int max = 0, returned = 0;
      switch (k_.spec_.pass) {
        case ConvPass::kForward: {
          CUDA_TRY(k_.what(), cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
          std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(max, 1)));
          CUDA_TRY(k_.what(), cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                                                     static_cast<int>(perf.size()),
                                                                     &returned, perf.data()));
          return candidates(perf, returned);
        }
        case ConvPass::kBackwardData: {
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
          std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(
              static_cast<size_t>(std::max(max, 1)));
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                  h, d.w, d.y, d.conv, d.x, static_cast<int>(perf.size()),
                                  &returned, perf.data()));
          return candidates(perf, returned);
        }
        case ConvPass::kBackwardFilter: {
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
          std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(
              static_cast<size_t>(std::max(max, 1)));
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                  h, d.x, d.y, d.conv, d.w, static_cast<int>(perf.size()),
                                  &returned, perf.data()));
          return candidates(perf, returned);
        }
      }
      return absl::InternalError(absl::StrCat(k_.what(), ": unknown convolution pass"));
    }

    absl::StatusOr<std::vector<AlgoCandidate>> measured() override {
      RETURN_IF_ERROR(prepare());
      RETURN_IF_ERROR(reserve(kFindWorkspace));
      cudnnHandle_t h = k_.ctx().cudnn();
      const Descriptors& d = k_.d_;
      CUDA_TRY(k_.what(), cudnnSetStream(h, stream_));
      CUDA_TRY(k_.what(), cudnnSetConvolutionMathType(d.conv, k_.types_.math));
      const size_t ws = static_cast<size_t>(ws_bytes_);
      int max = 0, returned = 0;
      std::vector<AlgoCandidate> out;
      switch (k_.spec_.pass) {
        case ConvPass::kForward: {
          CUDA_TRY(k_.what(), cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
          std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(max, 1)));
          CUDA_TRY(k_.what(), cudnnFindConvolutionForwardAlgorithmEx(
                                  h, d.x, x_, d.w, w_, d.conv, d.y, y_,
                                  static_cast<int>(perf.size()), &returned, perf.data(), ws_, ws));
          out = candidates(perf, returned);
          break;
        }
        case ConvPass::kBackwardData: {
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
          std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(
              static_cast<size_t>(std::max(max, 1)));
          CUDA_TRY(k_.what(), cudnnFindConvolutionBackwardDataAlgorithmEx(
                                  h, d.w, w_, d.y, y_, d.conv, d.x, x_,
                                  static_cast<int>(perf.size()), &returned, perf.data(), ws_, ws));
          out = candidates(perf, returned);
          break;
        }
        case ConvPass::kBackwardFilter: {
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
          std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(
              static_cast<size_t>(std::max(max, 1)));
          CUDA_TRY(k_.what(), cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                  h, d.x, x_, d.y, y_, d.conv, d.w, w_,
                                  static_cast<int>(perf.size()), &returned, perf.data(), ws_, ws));
          out = candidates(perf, returned);
          break;
        }
      }
      CUDA_TRY(k_.what(), cudaStreamSynchronize(stream_));
      return out;
    }

    absl::Status tryRun(const AlgoChoice& c) override {
      RETURN_IF_ERROR(prepare());
      cudnnHandle_t h = k_.ctx().cudnn();
      const Descriptors& d = k_.d_;
      CUDA_TRY(k_.what(), cudnnSetConvolutionMathType(d.conv, c.math));
      size_t bytes = 0;
      switch (k_.spec_.pass) {
        case ConvPass::kForward:
          CUDA_TRY(k_.what(), cudnnGetConvolutionForwardWorkspaceSize(
                                  h, d.x, d.w, d.conv, d.y,
                                  static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &bytes));
          break;
        case ConvPass::kBackwardData:
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardDataWorkspaceSize(
                                  h, d.w, d.y, d.conv, d.x,
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &bytes));
          break;
        case ConvPass::kBackwardFilter:
          CUDA_TRY(k_.what(), cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                  h, d.x, d.y, d.conv, d.w,
                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &bytes));
          break;
      }
      RETURN_IF_ERROR(reserve(static_cast<int64_t>(bytes)));
      CUDA_TRY(k_.what(), cudnnSetStream(h, stream_));
      const float one = 1.0f, zero = 0.0f;
      switch (k_.spec_.pass) {
        case ConvPass::kForward:
          RETURN_IF_ERROR(
              refused(cudnnConvolutionForward(h, &one, d.x, x_, d.w, w_, d.conv,
                                              static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws_,
                                              bytes, &zero, d.y, y_),
                      "cudnnConvolutionForward"));
          break;
        case ConvPass::kBackwardData:
          RETURN_IF_ERROR(refused(
              cudnnConvolutionBackwardData(h, &one, d.w, w_, d.y, y_, d.conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws_,
                                           bytes, &zero, d.x, x_),
              "cudnnConvolutionBackwardData"));
          break;
        case ConvPass::kBackwardFilter:
          RETURN_IF_ERROR(refused(
              cudnnConvolutionBackwardFilter(h, &one, d.x, x_, d.y, y_, d.conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
                                             ws_, bytes, &zero, d.w, w_),
              "cudnnConvolutionBackwardFilter"));
          break;
      }
      // A launch that fails on the GPU, not at the call, is a refusal too.
      RETURN_IF_ERROR(check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize",
                            "after the call on scratch tensors"));
      return absl::OkStatus();
    }

   private:
    /// A refusal of the call on trial, said briefly (the walk's error lists them all).
    static absl::Status refused(cudnnStatus_t code, const char* call) {
      return check(code, call, "on scratch tensors");
    }
    // The workspace cudnnFind may use: algorithms that need more are left out of its list.
    static constexpr int64_t kFindWorkspace = int64_t{256} << 20;

    absl::Status prepare() {
      if (stream_ != nullptr) return absl::OkStatus();
      CUDA_TRY(k_.what(), cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      const ConvGeometry& g = k_.g_;
      const int64_t elem = k_.bf16() ? 2 : 4;
      for (auto [p, count] : {std::pair{&x_, g.n * g.c * g.h * g.w},
                              std::pair{&w_, g.o * g.filterChannels() * g.window()},
                              std::pair{&y_, g.n * g.o * g.oh * g.ow}}) {
        CUDA_TRY(k_.what(), cudaMalloc(p, static_cast<size_t>(count * elem)));
        CUDA_TRY(k_.what(), cudaMemsetAsync(*p, 0, static_cast<size_t>(count * elem), stream_));
      }
      CUDA_TRY(k_.what(), cudaStreamSynchronize(stream_));
      return absl::OkStatus();
    }

    absl::Status reserve(int64_t bytes) {
      if (bytes <= ws_bytes_) return absl::OkStatus();
      if (ws_ != nullptr) CUDA_TRY(k_.what(), cudaFree(ws_));
      ws_ = nullptr;
      ws_bytes_ = 0;
      CUDA_TRY(k_.what(), cudaMalloc(&ws_, static_cast<size_t>(bytes)));
      ws_bytes_ = bytes;
      return absl::OkStatus();
    }

    const ConvKernel& k_;
    cudaStream_t stream_ = nullptr;
    void *x_ = nullptr, *w_ = nullptr, *y_ = nullptr, *ws_ = nullptr;
    int64_t ws_bytes_ = 0;
  };

  // Among the algorithms within `max_workspace` bytes (part of the key: another plan may
  // leave another amount).
  absl::Status chooseAlgorithm(int64_t max_workspace) {
    const bool measure = ctx().measureConvAlgorithms();
    const std::string key = absl::StrCat(algoCacheKey(spec_.pass, g_, types_, ctx().gpu()),
                                         measure ? " measured" : "", " ws", max_workspace);
    if (AlgoCache::get().find(key, &choice_)) return absl::OkStatus();
    CudnnTrials trials(*this);
    ASSIGN_OR_RETURN(choice_, named(chooseRunnableAlgo(trials, types_, measure, max_workspace)));
    AlgoCache::get().put(key, choice_);
    return absl::OkStatus();
  }

  absl::Status queryWorkspace() {
    cudnnHandle_t h = ctx().cudnn();
    size_t bytes = 0;
    switch (spec_.pass) {
      case ConvPass::kForward:
        CUDA_TRY(what(), cudnnGetConvolutionForwardWorkspaceSize(
                             h, d_.x, d_.w, d_.conv, d_.y,
                             static_cast<cudnnConvolutionFwdAlgo_t>(choice_.algo), &bytes));
        break;
      case ConvPass::kBackwardData:
        CUDA_TRY(what(), cudnnGetConvolutionBackwardDataWorkspaceSize(
                             h, d_.w, d_.y, d_.conv, d_.x,
                             static_cast<cudnnConvolutionBwdDataAlgo_t>(choice_.algo), &bytes));
        break;
      case ConvPass::kBackwardFilter:
        CUDA_TRY(what(), cudnnGetConvolutionBackwardFilterWorkspaceSize(
                             h, d_.x, d_.y, d_.conv, d_.w,
                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice_.algo), &bytes));
        break;
    }
    cudnn_bytes_ = static_cast<int64_t>(bytes);
    return absl::OkStatus();
  }

  /// y or dy as the per-channel kernels take it: [N, O, OH*OW], or NHWC as
  /// [N*OH*OW, O, 1] (the same order of each channel's values: conv_math.h).
  struct Planes {
    int64_t n, c, hw;
  };
  Planes yPlanes() const {
    const int64_t hw = g_.oh * g_.ow;
    return y_nhwc_ ? Planes{g_.n * hw, g_.o, 1} : Planes{g_.n, g_.o, hw};
  }

  /// An activation of `n` x `c` x `hw` from NCHW `src` into NHWC `dst`; returns dst.
  const void* toNhwc(const void* src, void* dst, int64_t n, int64_t c, int64_t hw,
                     cudaStream_t stream) const {
    if (bf16())
      launchRelayout(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), n, c, hw, true,
                     stream);
    else
      launchRelayout(static_cast<const float*>(src), static_cast<float*>(dst), n, c, hw, true,
                     stream);
    return dst;
  }
  /// Back from NHWC `src` into NCHW `dst`.
  void toNchw(const void* src, void* dst, int64_t n, int64_t c, int64_t hw,
              cudaStream_t stream) const {
    if (bf16())
      launchRelayout(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), n, c, hw,
                     false, stream);
    else
      launchRelayout(static_cast<const float*>(src), static_cast<float*>(dst), n, c, hw, false,
                     stream);
  }

  /// The filter as cuDNN reads it: the variable itself, or in `scratch` converted to bf16
  /// and/or reordered KCRS -> KRSC in one pass.
  const void* filter(const TensorView& w, void* scratch, cudaStream_t stream) const {
    const int64_t kk = g_.window(), wc = g_.filterChannels();
    if (types_.nhwc) {
      if (types_.convert_w)
        launchRelayout(w.as<const float>(), static_cast<uint16_t*>(scratch), g_.o, wc, kk, true,
                       stream);
      else if (bf16())
        launchRelayout(w.as<const uint16_t>(), static_cast<uint16_t*>(scratch), g_.o, wc, kk, true,
                       stream);
      else
        launchRelayout(w.as<const float>(), static_cast<float*>(scratch), g_.o, wc, kk, true,
                       stream);
      return scratch;
    }
    if (!types_.convert_w) return w.data;
    launchCast(w.as<const float>(), static_cast<uint16_t*>(scratch), g_.o * wc * kk, stream);
    return scratch;
  }

  /// The KCRS gradient `dw_out` from cuDNN's dw in the workspace (bf16 when widened,
  /// KRSC when NHWC).
  void filterGradient(const void* dw, const TensorView& dw_out, cudaStream_t stream) const {
    const int64_t kk = g_.window(), wc = g_.filterChannels();
    if (!types_.nhwc) {
      launchCast(static_cast<const uint16_t*>(dw), dw_out.as<float>(), g_.o * wc * kk, stream);
      return;
    }
    if (types_.widen_dw)
      launchRelayout(static_cast<const uint16_t*>(dw), dw_out.as<float>(), g_.o, wc, kk, false,
                     stream);
    else if (bf16())
      launchRelayout(static_cast<const uint16_t*>(dw), dw_out.as<uint16_t>(), g_.o, wc, kk, false,
                     stream);
    else
      launchRelayout(static_cast<const float*>(dw), dw_out.as<float>(), g_.o, wc, kk, false,
                     stream);
  }

  /// y (the convolution) += bias, then residual and relu where asked, in place.
  void epilogue(cudaStream_t stream, absl::Span<const TensorView> in,
                absl::Span<const TensorView> out) const {
    const Planes p = yPlanes();
    const void* res = spec_.residual ? in[3].data : nullptr;
    if (!bf16()) {
      launchConvEpilogue(out[0].as<float>(), in[2].as<const float>(),
                         static_cast<const float*>(res), spec_.relu, p.n, p.c, p.hw, stream);
    } else if (bias_dtype_ == ir::DType::kF32) {
      launchConvEpilogue(out[0].as<uint16_t>(), in[2].as<const float>(),
                         static_cast<const uint16_t*>(res), spec_.relu, p.n, p.c, p.hw, stream);
    } else {
      launchConvEpilogue(out[0].as<uint16_t>(), in[2].as<const uint16_t>(),
                         static_cast<const uint16_t*>(res), spec_.relu, p.n, p.c, p.hw, stream);
    }
  }

  /// db = the sums of dy over the batch and the plane, in the bias's dtype.
  void biasGrad(cudaStream_t stream, const TensorView& dy, const TensorView& db) const {
    const Planes p = yPlanes();
    if (!bf16())
      launchBiasGrad(dy.as<const float>(), db.as<float>(), p.n, p.c, p.hw, stream);
    else if (bias_dtype_ == ir::DType::kF32)
      launchBiasGrad(dy.as<const uint16_t>(), db.as<float>(), p.n, p.c, p.hw, stream);
    else
      launchBiasGrad(dy.as<const uint16_t>(), db.as<uint16_t>(), p.n, p.c, p.hw, stream);
  }

  ConvSpec spec_;
  ConvGeometry g_{};
  ConvTypes types_{};
  ir::DType bias_dtype_ = ir::DType::kF32;
  Descriptors d_;
  AlgoChoice choice_{};
  const absl::flat_hash_set<const ir::Value*>* nhwc_plan_ = nullptr;
  bool x_nhwc_ = false, y_nhwc_ = false;  // the plan's layouts of the two sides
  int64_t cudnn_bytes_ = 0;               // cuDNN's workspace, at the start of ours
  int64_t w_offset_ = 0;                  // the filter cuDNN reads, or the dw it writes, after it
  int64_t x_offset_ = -1;                 // an NCHW x side transposed for cuDNN (-1: none)
  int64_t y_offset_ = -1;                 // an NCHW y side transposed for cuDNN (-1: none)
  int64_t total_bytes_ = 0;
};

}  // namespace

KernelOr makeConv2dKernel(const KernelInit& init) {  // x, w, b? -> y
  return ConvKernel::create(init, {.pass = ConvPass::kForward,
                                   .x_index = 0,
                                   .w_index = 1,
                                   .bias = init.node.numOperands() > 2});
}

KernelOr makeConv2dStatsKernel(const KernelInit& init) {  // x, w, b? -> y, stats
  return ConvKernel::create(init, {.pass = ConvPass::kForward,
                                   .x_index = 0,
                                   .w_index = 1,
                                   .bias = init.node.numOperands() > 2,
                                   .stats = true});
}

KernelOr makeConv2dBiasActKernel(const KernelInit& init) {  // x, w, b, residual? -> y
  return ConvKernel::create(init, {.pass = ConvPass::kForward,
                                   .x_index = 0,
                                   .w_index = 1,
                                   .bias = true,
                                   .residual = init.node.numOperands() > 3,
                                   .relu = ir::attr::relu(init.node)});
}

KernelOr makeConv2dBackwardDataKernel(const KernelInit& init) {  // dy, w, x -> dx
  return ConvKernel::create(init, {.pass = ConvPass::kBackwardData, .x_index = 2, .w_index = 1});
}

KernelOr makeConv2dBackwardFilterKernel(const KernelInit& init) {  // dy, x, w -> dw, db?
  return ConvKernel::create(init, {.pass = ConvPass::kBackwardFilter,
                                   .x_index = 1,
                                   .w_index = 2,
                                   .bias = ir::attr::bias(init.node)});
}

}  // namespace tandem::backend::cuda
