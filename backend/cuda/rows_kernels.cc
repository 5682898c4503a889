// The ops over rows or an axis on CUDA: layer_norm, softmax, log_softmax and their
// backward ops, on rows.cu's own kernels (rows_launch.h; their per-row math is
// row_math.h, host-tested against the CPU's oneDNN cores in
// tests/cuda/transformer_math_test.cc): f32 or bf16 data, f32 parameters and statistics.

#include <cstdint>
#include <memory>

#include "backend/axis_split.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/rows_launch.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {
namespace {

const uint16_t* bits(const TensorView& v) { return static_cast<const uint16_t*>(v.data); }
uint16_t* bitsOut(const TensorView& v) { return static_cast<uint16_t*>(v.data); }

class LayerNormKernel final : public CudaKernel {
 public:
  LayerNormKernel(const KernelInit& init, bool backward)
      : CudaKernel(init.ctx), backward_(backward) {
    setDescription(init.node.describe());
    const ir::TensorType& x = init.node.operand(backward ? 1 : 0)->type();
    width_ = x.shape.back();
    rows_ = x.numElements() / width_;
    low_ = x.dtype == ir::DType::kBF16;
    eps_ = static_cast<float>(init.node.floatAttr("eps"));
  }

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    if (!backward_) {  // x, gamma, beta -> y, mean, var
      if (low_)
        launchLayerNorm(bits(in[0]), in[1].f32(), in[2].f32(), bitsOut(out[0]), out[1].f32(),
                        out[2].f32(), rows_, width_, eps_, s);
      else
        launchLayerNorm(in[0].f32(), in[1].f32(), in[2].f32(), out[0].f32(), out[1].f32(),
                        out[2].f32(), rows_, width_, eps_, s);
      return absl::OkStatus();
    }
    // dy, x, mean, var, gamma -> dx, dgamma, dbeta
    if (low_)
      launchLayerNormBackward(bits(in[1]), bits(in[0]), in[2].f32(), in[3].f32(), in[4].f32(),
                              bitsOut(out[0]), out[1].f32(), out[2].f32(), rows_, width_, eps_, s);
    else
      launchLayerNormBackward(in[1].f32(), in[0].f32(), in[2].f32(), in[3].f32(), in[4].f32(),
                              out[0].f32(), out[1].f32(), out[2].f32(), rows_, width_, eps_, s);
    return absl::OkStatus();
  }

 private:
  bool backward_;
  bool low_ = false;
  int64_t rows_ = 0, width_ = 1;
  float eps_ = 1e-5f;
};

class SoftmaxKernel final : public CudaKernel {
 public:
  SoftmaxKernel(const KernelInit& init, AxisSplit dims, bool log, bool backward)
      : CudaKernel(init.ctx), dims_(dims), log_(log), backward_(backward) {
    setDescription(init.node.describe());
    low_ = init.node.result()->type().dtype == ir::DType::kBF16;
  }

 protected:
  absl::Status enqueue(cudaStream_t s, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    if (!backward_) {
      if (low_)
        launchSoftmax(bits(in[0]), bitsOut(out[0]), dims_, log_, s);
      else
        launchSoftmax(in[0].f32(), out[0].f32(), dims_, log_, s);
    } else if (low_) {  // (dy, y) -> dx
      launchSoftmaxBackward(bits(in[1]), bits(in[0]), bitsOut(out[0]), dims_, log_, s);
    } else {
      launchSoftmaxBackward(in[1].f32(), in[0].f32(), out[0].f32(), dims_, log_, s);
    }
    return absl::OkStatus();
  }

 private:
  AxisSplit dims_;
  bool log_, backward_, low_ = false;
};

KernelOr makeSoftmax(const KernelInit& init, bool log, bool backward) {
  const ir::Node& n = init.node;
  ASSIGN_OR_RETURN(AxisSplit dims, splitAtAxis(n.result()->type().shape, n.intAttr("axis"),
                                               n.describe(), log ? "log_softmax" : "softmax"));
  return std::unique_ptr<CudaKernel>(new SoftmaxKernel(init, dims, log, backward));
}

}  // namespace

KernelOr makeLayerNormKernel(const KernelInit& init) {
  return std::unique_ptr<CudaKernel>(new LayerNormKernel(init, /*backward=*/false));
}

KernelOr makeLayerNormBackwardKernel(const KernelInit& init) {
  return std::unique_ptr<CudaKernel>(new LayerNormKernel(init, /*backward=*/true));
}

KernelOr makeSoftmaxKernel(const KernelInit& i) { return makeSoftmax(i, false, false); }
KernelOr makeLogSoftmaxKernel(const KernelInit& i) { return makeSoftmax(i, true, false); }
KernelOr makeSoftmaxBackwardKernel(const KernelInit& i) { return makeSoftmax(i, false, true); }
KernelOr makeLogSoftmaxBackwardKernel(const KernelInit& i) { return makeSoftmax(i, true, true); }

}  // namespace tandem::backend::cuda
