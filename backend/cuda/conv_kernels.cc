// Convolutions through cuDNN's legacy API: conv2d, its two backward ops, conv2d_stats and
// conv2d_bias_act. Descriptors, the algorithm and the workspace size are settled when the
// kernel is made (conv_descriptors.h has the pure rules); a launch only enqueues.
//
// The algorithm is cuDNN's heuristic choice (cudnnGet*Algorithm_v7), not a timed search:
// the same shape gets the same algorithm in every run, a deterministic one wherever cuDNN
// lists one, so runs stay bit-identical; it is cached process-wide per shape, types, math
// mode and GPU (conv_descriptors.h's chooseAlgo and algoCacheKey).
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
    RETURN_IF_ERROR(k->build(init.node));
    return std::unique_ptr<CudaKernel>(std::move(k));
  }

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    cudnnHandle_t h = ctx().cudnn();
    CUDA_TRY(what(), cudnnSetStream(h, stream));
    ASSIGN_OR_RETURN(void* ws, ctx().workspace(total_bytes_, stream));
    char* scratch = static_cast<char*>(ws) + scratch_offset_;
    const float one = 1.0f, zero = 0.0f;
    const int64_t w_elems = g_.o * g_.c * g_.k * g_.k;
    switch (spec_.pass) {
      case ConvPass::kForward: {  // x, w, b?, residual? -> y, stats?
        const void* w = in[1].data;
        if (types_.convert_w) {
          auto* w16 = reinterpret_cast<uint16_t*>(scratch);
          launchCast(in[1].as<const float>(), w16, w_elems, stream);
          w = w16;
        }
        CUDA_TRY(what(), cudnnConvolutionForward(
                             h, &one, d_.x, in[0].data, d_.w, w, d_.conv,
                             static_cast<cudnnConvolutionFwdAlgo_t>(choice_.algo), ws,
                             static_cast<size_t>(cudnn_bytes_), &zero, d_.y, out[0].data));
        if (spec_.bias) epilogue(stream, in, out);
        if (spec_.stats)
          launchChannelStats(out[0].data, bf16(), g_.n, g_.o, g_.oh * g_.ow,
                             static_cast<double*>(out[1].data), stream);
        return absl::OkStatus();
      }
      case ConvPass::kBackwardData: {  // dy, w, x -> dx
        const void* w = in[1].data;
        if (types_.convert_w) {
          auto* w16 = reinterpret_cast<uint16_t*>(scratch);
          launchCast(in[1].as<const float>(), w16, w_elems, stream);
          w = w16;
        }
        CUDA_TRY(what(), cudnnConvolutionBackwardData(
                             h, &one, d_.w, w, d_.y, in[0].data, d_.conv,
                             static_cast<cudnnConvolutionBwdDataAlgo_t>(choice_.algo), ws,
                             static_cast<size_t>(cudnn_bytes_), &zero, d_.x, out[0].data));
        return absl::OkStatus();
      }
      case ConvPass::kBackwardFilter: {  // dy, x, w -> dw, db?
        void* dw = types_.widen_dw ? static_cast<void*>(scratch) : out[0].data;
        CUDA_TRY(what(), cudnnConvolutionBackwardFilter(
                             h, &one, d_.x, in[1].data, d_.y, in[0].data, d_.conv,
                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice_.algo), ws,
                             static_cast<size_t>(cudnn_bytes_), &zero, d_.w, dw));
        if (types_.widen_dw)
          launchCast(static_cast<const uint16_t*>(dw), out[0].as<float>(), w_elems, stream);
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
    ASSIGN_OR_RETURN(g_, named(convGeometry(x, w, n.intAttr("stride"), n.intAttr("pad"))));
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

    RETURN_IF_ERROR(makeDescriptors());
    RETURN_IF_ERROR(chooseAlgorithm());
    CUDA_TRY(what(), cudnnSetConvolutionMathType(d_.conv, choice_.math));
    RETURN_IF_ERROR(queryWorkspace());
    // Converted weights (forward, backward data) or the bf16 dw (backward filter).
    const int64_t w_elems = g_.o * g_.c * g_.k * g_.k;
    scratch_offset_ = alignUp(cudnn_bytes_);
    const bool scratch = types_.convert_w || types_.widen_dw;
    total_bytes_ = scratch_offset_ + (scratch ? alignUp(w_elems * int64_t{sizeof(uint16_t)}) : 0);
    return absl::OkStatus();
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
    CUDA_TRY(what(), cudnnSetTensor4dDescriptor(d_.x, CUDNN_TENSOR_NCHW, types_.data, i(g_.n),
                                                i(g_.c), i(g_.h), i(g_.w)));
    CUDA_TRY(what(), cudnnSetTensor4dDescriptor(d_.y, CUDNN_TENSOR_NCHW, types_.data, i(g_.n),
                                                i(g_.o), i(g_.oh), i(g_.ow)));
    CUDA_TRY(what(), cudnnSetFilter4dDescriptor(d_.w, types_.data, CUDNN_TENSOR_NCHW, i(g_.o),
                                                i(g_.c), i(g_.k), i(g_.k)));
    CUDA_TRY(what(), cudnnSetConvolution2dDescriptor(d_.conv, i(g_.pad), i(g_.pad), i(g_.stride),
                                                     i(g_.stride), 1, 1, CUDNN_CROSS_CORRELATION,
                                                     types_.compute));
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

  /// cuDNN's heuristic list for this pass, reduced to AlgoCandidates.
  template <typename Perf>
  static std::vector<AlgoCandidate> candidates(const std::vector<Perf>& perf, int returned) {
    std::vector<AlgoCandidate> out;
    for (int i = 0; i < returned && i < static_cast<int>(perf.size()); ++i)
      out.push_back({static_cast<int>(perf[static_cast<size_t>(i)].algo),
                     perf[static_cast<size_t>(i)].status, perf[static_cast<size_t>(i)].determinism,
                     perf[static_cast<size_t>(i)].mathType,
                     static_cast<int64_t>(perf[static_cast<size_t>(i)].memory)});
    return out;
  }

  absl::Status chooseAlgorithm() {
    const std::string key = algoCacheKey(spec_.pass, g_, types_, ctx().gpu());
    if (AlgoCache::get().find(key, &choice_)) return absl::OkStatus();
    cudnnHandle_t h = ctx().cudnn();
    int max = 0, returned = 0;
    std::vector<AlgoCandidate> list;
    switch (spec_.pass) {
      case ConvPass::kForward: {
        CUDA_TRY(what(), cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(max, 1)));
        CUDA_TRY(what(), cudnnGetConvolutionForwardAlgorithm_v7(h, d_.x, d_.w, d_.conv, d_.y,
                                                                static_cast<int>(perf.size()),
                                                                &returned, perf.data()));
        list = candidates(perf, returned);
        break;
      }
      case ConvPass::kBackwardData: {
        CUDA_TRY(what(), cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(std::max(max, 1)));
        CUDA_TRY(what(), cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d_.w, d_.y, d_.conv, d_.x,
                                                                     static_cast<int>(perf.size()),
                                                                     &returned, perf.data()));
        list = candidates(perf, returned);
        break;
      }
      case ConvPass::kBackwardFilter: {
        CUDA_TRY(what(), cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(
            static_cast<size_t>(std::max(max, 1)));
        CUDA_TRY(what(), cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                             h, d_.x, d_.y, d_.conv, d_.w, static_cast<int>(perf.size()), &returned,
                             perf.data()));
        list = candidates(perf, returned);
        break;
      }
    }
    ASSIGN_OR_RETURN(choice_, named(chooseAlgo(list, types_)));
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

  /// y (the convolution) += bias, then residual and relu where asked, in place.
  void epilogue(cudaStream_t stream, absl::Span<const TensorView> in,
                absl::Span<const TensorView> out) const {
    const int64_t hw = g_.oh * g_.ow;
    const void* res = spec_.residual ? in[3].data : nullptr;
    if (!bf16()) {
      launchConvEpilogue(out[0].as<float>(), in[2].as<const float>(),
                         static_cast<const float*>(res), spec_.relu, g_.n, g_.o, hw, stream);
    } else if (bias_dtype_ == ir::DType::kF32) {
      launchConvEpilogue(out[0].as<uint16_t>(), in[2].as<const float>(),
                         static_cast<const uint16_t*>(res), spec_.relu, g_.n, g_.o, hw, stream);
    } else {
      launchConvEpilogue(out[0].as<uint16_t>(), in[2].as<const uint16_t>(),
                         static_cast<const uint16_t*>(res), spec_.relu, g_.n, g_.o, hw, stream);
    }
  }

  /// db = the sums of dy over the batch and the plane, in the bias's dtype.
  void biasGrad(cudaStream_t stream, const TensorView& dy, const TensorView& db) const {
    const int64_t hw = g_.oh * g_.ow;
    if (!bf16())
      launchBiasGrad(dy.as<const float>(), db.as<float>(), g_.n, g_.o, hw, stream);
    else if (bias_dtype_ == ir::DType::kF32)
      launchBiasGrad(dy.as<const uint16_t>(), db.as<float>(), g_.n, g_.o, hw, stream);
    else
      launchBiasGrad(dy.as<const uint16_t>(), db.as<uint16_t>(), g_.n, g_.o, hw, stream);
  }

  ConvSpec spec_;
  ConvGeometry g_{};
  ConvTypes types_{};
  ir::DType bias_dtype_ = ir::DType::kF32;
  Descriptors d_;
  AlgoChoice choice_{};
  int64_t cudnn_bytes_ = 0;     // cuDNN's workspace, at the start of ours
  int64_t scratch_offset_ = 0;  // converted weights or the bf16 dw, after it
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
                                   .relu = init.node.boolAttr("relu")});
}

KernelOr makeConv2dBackwardDataKernel(const KernelInit& init) {  // dy, w, x -> dx
  return ConvKernel::create(init, {.pass = ConvPass::kBackwardData, .x_index = 2, .w_index = 1});
}

KernelOr makeConv2dBackwardFilterKernel(const KernelInit& init) {  // dy, x, w -> dw, db?
  return ConvKernel::create(init, {.pass = ConvPass::kBackwardFilter,
                                   .x_index = 1,
                                   .w_index = 2,
                                   .bias = init.node.boolAttr("bias")});
}

}  // namespace tandem::backend::cuda
