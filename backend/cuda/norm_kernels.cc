// Batch norm, plain and split for sync batch norm, and its folding: CUDA kernels over the
// own kernels of norm.cu. Not cuDNN's batch norm: sync batch norm splits training batch
// norm into statistics (conv2d_stats), all_reduce and apply (batch_norm_apply), and cuDNN's
// training API computes the statistics itself and cannot take given ones; the backward is
// split the same way (reduce, all_reduce, apply). One family of own kernels serves the
// fused and the plain ops alike, so both give the same results.

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/norm_launch.h"
#include "ir/op_views.h"

namespace tandem::backend::cuda {
namespace {

/// N, C and H*W of an [N,C,H,W] or [N,C] tensor as the launch functions take them. An
/// NHWC tensor is [N*H*W, C, 1]: element l is in channel l % C, and channel ch's values
/// come in the same order k = image * H*W + pixel as in NCHW, so the per-channel sums add
/// the same numbers in the same order and both layouts give the same bits.
struct Planes {
  int64_t n, c, hw;
  Planes(const ir::TensorType& t, bool nhwc) : c(t.shape[1]) {
    const int64_t pixels = t.rank() == 4 ? t.shape[2] * t.shape[3] : 1;
    n = nhwc ? t.shape[0] * pixels : t.shape[0];
    hw = nhwc ? 1 : pixels;
  }
};

/// Device memory a kernel owns for its per-channel coefficients and sums, allocated when
/// the kernel is made (never during a step, so never during a CUDA graph capture).
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (data_ != nullptr) cudaFree(data_);
  }
  absl::Status allocate(int64_t bytes, const std::string& what) {
    CUDA_TRY(what, cudaMalloc(&data_, static_cast<size_t>(bytes)));
    return absl::OkStatus();
  }
  template <typename T>
  T* at(int64_t byte_offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + byte_offset);
  }

 private:
  void* data_ = nullptr;
};

absl::Status checkActivations(const ir::Node& n, const ir::TensorType& t) {
  if (t.dtype == ir::DType::kF32 || t.dtype == ir::DType::kBF16) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(n.describe(), ": no CUDA kernel for ",
                                               ir::dtypeName(t.dtype), " activations"));
}

/// The base of the family: the node's planes, its activations' dtype and its scratch.
class NormKernel : public CudaKernel {
 protected:
  NormKernel(const KernelInit& init, const ir::Value* act)
      : CudaKernel(init.ctx),
        p_(act->type(), init.isNhwc(act)),
        bf16_(act->type().dtype == ir::DType::kBF16) {}
  absl::Status reserve(int64_t bytes, const ir::Node& n) {
    return scratch_.allocate(bytes, n.describe());
  }
  Planes p_;
  bool bf16_;
  Scratch scratch_;
};

// in: x, gamma, beta, running_mean, running_var; out: y (, save_mean, save_invstd).
class BatchNormKernel final : public NormKernel {
 public:
  BatchNormKernel(const KernelInit& init, bool training)
      : NormKernel(init, init.node.operand(0)),
        training_(training),
        eps_(ir::attr::eps(init.node)),
        momentum_(ir::attr::momentum(init.node)) {}
  absl::Status init(const ir::Node& n) { return reserve(2 * p_.c * sizeof(float), n); }

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    float* coef = scratch_.at<float>(0);
    if (training_)
      launchBatchNormMoments(in[0].data, bf16_, p_.n, p_.c, p_.hw, in[1].f32(), in[2].f32(), eps_,
                             momentum_, in[3].f32(), in[4].f32(), out[1].f32(), out[2].f32(),
                             coef, s);
    else
      launchInferenceCoefficients(in[1].f32(), in[2].f32(), in[3].f32(), in[4].f32(), p_.c, eps_,
                                  coef, s);
    launchNormalize(in[0].data, nullptr, out[0].data, bf16_, p_.n, p_.c, p_.hw, coef,
                    /*relu=*/false, s);
    return absl::OkStatus();
  }

 private:
  bool training_;
  double eps_, momentum_;
};

// in: dy, x, gamma, save_mean, save_invstd; out: dx, dgamma, dbeta.
class BatchNormBackwardKernel final : public NormKernel {
 public:
  explicit BatchNormBackwardKernel(const KernelInit& init)
      : NormKernel(init, init.node.operand(1)) {}
  absl::Status init(const ir::Node& n) {
    return reserve(2 * p_.c * sizeof(double) + 3 * p_.c * sizeof(float), n);
  }

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    double* sums = scratch_.at<double>(0);
    float* coef = scratch_.at<float>(2 * p_.c * static_cast<int64_t>(sizeof(double)));
    launchBackwardSums(in[0].data, in[1].data, nullptr, bf16_, p_.n, p_.c, p_.hw, in[3].f32(),
                       in[4].f32(), sums, out[2].f32(), out[1].f32(), s);
    launchBackwardCoefficients(nullptr, static_cast<double>(p_.n * p_.hw), sums, in[2].f32(),
                               in[4].f32(), p_.c, coef, s);
    launchBackwardApply(in[0].data, in[1].data, nullptr, out[0].data, nullptr, bf16_, p_.n, p_.c,
                        p_.hw, coef, in[3].f32(), s);
    return absl::OkStatus();
  }
};

// in: y, stats, gamma, beta, running_mean, running_var, residual?; out: out, save_mean,
// save_invstd.
class BatchNormApplyKernel final : public NormKernel {
 public:
  explicit BatchNormApplyKernel(const KernelInit& init)
      : NormKernel(init, init.node.operand(0)),
        eps_(ir::attr::eps(init.node)),
        momentum_(ir::attr::momentum(init.node)),
        relu_(ir::attr::relu(init.node)),
        residual_(init.node.numOperands() > 6) {}
  absl::Status init(const ir::Node& n) { return reserve(2 * p_.c * sizeof(float), n); }

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    float* coef = scratch_.at<float>(0);
    launchStatsCoefficients(static_cast<const double*>(in[1].data), in[2].f32(), in[3].f32(),
                            p_.c, eps_, momentum_, in[4].f32(), in[5].f32(), out[1].f32(),
                            out[2].f32(), coef, s);
    launchNormalize(in[0].data, residual_ ? in[6].data : nullptr, out[0].data, bf16_, p_.n, p_.c,
                    p_.hw, coef, relu_, s);
    return absl::OkStatus();
  }

 private:
  double eps_, momentum_;
  bool relu_, residual_;
};

// in: y, stats, gamma, beta; out: out (batch_norm_apply's, the running statistics alone).
class BatchNormRecomputeKernel final : public NormKernel {
 public:
  explicit BatchNormRecomputeKernel(const KernelInit& init)
      : NormKernel(init, init.node.operand(0)),
        eps_(ir::attr::eps(init.node)),
        relu_(ir::attr::relu(init.node)) {}
  absl::Status init(const ir::Node& n) { return reserve(2 * p_.c * sizeof(float), n); }

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    float* coef = scratch_.at<float>(0);
    launchStatsCoefficients(static_cast<const double*>(in[1].data), in[2].f32(), in[3].f32(),
                            p_.c, eps_, 0.0, nullptr, nullptr, nullptr, nullptr, coef, s);
    launchNormalize(in[0].data, nullptr, out[0].data, bf16_, p_.n, p_.c, p_.hw, coef, relu_, s);
    return absl::OkStatus();
  }

 private:
  double eps_;
  bool relu_;
};

// in: dout, y, save_mean, save_invstd, out?; out: sums f64[2,C], dbeta, dgamma.
class BatchNormBackwardReduceKernel final : public NormKernel {
 public:
  explicit BatchNormBackwardReduceKernel(const KernelInit& init)
      : NormKernel(init, init.node.operand(1)), relu_(init.node.numOperands() > 4) {}

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    launchBackwardSums(in[0].data, in[1].data, relu_ ? in[4].data : nullptr, bf16_, p_.n, p_.c,
                       p_.hw, in[2].f32(), in[3].f32(), static_cast<double*>(out[0].data),
                       out[1].f32(), out[2].f32(), s);
    return absl::OkStatus();
  }

 private:
  bool relu_;
};

// in: dout, y, gamma, save_mean, save_invstd, sums, stats, out?; out: dy (, dz).
class BatchNormBackwardApplyKernel final : public NormKernel {
 public:
  explicit BatchNormBackwardApplyKernel(const KernelInit& init)
      : NormKernel(init, init.node.operand(1)),
        relu_(init.node.numOperands() > 7),
        residual_(ir::attr::residual(init.node)) {}
  absl::Status init(const ir::Node& n) { return reserve(3 * p_.c * sizeof(float), n); }

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    float* coef = scratch_.at<float>(0);
    launchBackwardCoefficients(static_cast<const double*>(in[6].data), 0.0,
                               static_cast<const double*>(in[5].data), in[2].f32(), in[4].f32(),
                               p_.c, coef, s);
    launchBackwardApply(in[0].data, in[1].data, relu_ ? in[7].data : nullptr, out[0].data,
                        residual_ ? out[1].data : nullptr, bf16_, p_.n, p_.c, p_.hw, coef,
                        in[3].f32(), s);
    return absl::OkStatus();
  }

 private:
  bool relu_, residual_;
};

// in: w, b?, gamma, beta, running_mean, running_var; out: w', b'.
class FoldBatchNormKernel final : public CudaKernel {
 public:
  explicit FoldBatchNormKernel(const KernelInit& init)
      : CudaKernel(init.ctx),
        bias_(init.node.numOperands() > 5),
        k_(init.node.operand(0)->type().shape[0]),
        per_(init.node.operand(0)->type().numElements() / std::max<int64_t>(k_, 1)),
        eps_(ir::attr::eps(init.node)) {}

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    const size_t g = bias_ ? 2 : 1;  // where gamma is
    launchFoldBatchNorm(in[0].f32(), bias_ ? in[1].f32() : nullptr, in[g].f32(),
                        in[g + 1].f32(), in[g + 2].f32(), in[g + 3].f32(), k_, per_, eps_,
                        out[0].f32(), out[1].f32(), s);
    return absl::OkStatus();
  }

 private:
  bool bias_;
  int64_t k_, per_;
  double eps_;
};

/// Makes kernel K for init.node after checking its activations (operand `act`) and, when
/// K has one, running its init (the scratch allocation).
template <typename K>
KernelOr makeNorm(const KernelInit& init, size_t act) {
  RETURN_IF_ERROR(checkActivations(init.node, init.node.operand(act)->type()));
  auto k = std::make_unique<K>(init);
  if constexpr (requires { k->init(init.node); }) RETURN_IF_ERROR(k->init(init.node));
  return std::unique_ptr<CudaKernel>(std::move(k));
}

}  // namespace

KernelOr makeBatchNormKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  RETURN_IF_ERROR(checkActivations(n, n.operand(0)->type()));
  auto k = std::make_unique<BatchNormKernel>(init, ir::attr::training(n));
  RETURN_IF_ERROR(k->init(n));
  return std::unique_ptr<CudaKernel>(std::move(k));
}

KernelOr makeBatchNormBackwardKernel(const KernelInit& init) {
  return makeNorm<BatchNormBackwardKernel>(init, 1);
}
KernelOr makeBatchNormApplyKernel(const KernelInit& init) {
  return makeNorm<BatchNormApplyKernel>(init, 0);
}
KernelOr makeBatchNormRecomputeKernel(const KernelInit& init) {
  return makeNorm<BatchNormRecomputeKernel>(init, 0);
}
KernelOr makeBatchNormBackwardReduceKernel(const KernelInit& init) {
  return makeNorm<BatchNormBackwardReduceKernel>(init, 1);
}
KernelOr makeBatchNormBackwardApplyKernel(const KernelInit& init) {
  return makeNorm<BatchNormBackwardApplyKernel>(init, 1);
}

KernelOr makeFoldBatchNormKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  if (n.operand(0)->type().dtype != ir::DType::kF32)
    return absl::UnimplementedError(
        absl::StrCat(n.describe(), ": fold_batch_norm takes f32 weights on CUDA"));
  return std::unique_ptr<CudaKernel>(std::make_unique<FoldBatchNormKernel>(init));
}

}  // namespace tandem::backend::cuda
