// layer_norm and its backward op over the layer norm cores (backend/cpu/layer_norm_core.h:
// oneDNN's layer_normalization primitives over the rows of x, as they lie).

#include <memory>
#include <utility>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layer_norm_core.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

LayerNormSpec specOf(const ir::TensorType& x, double eps) {
  const int64_t width = x.shape.back();
  return LayerNormSpec{.rows = x.numElements() / width,
                       .width = width,
                       .data = x.dtype,
                       .epsilon = static_cast<float>(eps)};
}

class LayerNormKernel final : public CpuKernel {
 public:
  explicit LayerNormKernel(LayerNormForward core) : core_(std::move(core)) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::LayerNormView;
    core_.run(in[V::kX].data, in[V::kGamma].f32(), in[V::kBeta].f32(), out[0].data, out[1].f32(),
              out[2].f32());
  }

 private:
  LayerNormForward core_;
};

class LayerNormBackwardKernel final : public CpuKernel {
 public:
  explicit LayerNormBackwardKernel(LayerNormBackward core) : core_(std::move(core)) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::LayerNormBackwardView;
    core_.run(in[V::kX].data, in[V::kDy].data, in[V::kMean].f32(), in[V::kVar].f32(),
              in[V::kGamma].f32(), out[0].data, out[1].f32(), out[2].f32());
  }

 private:
  LayerNormBackward core_;
};

}  // namespace

KernelOr makeLayerNormKernel(const KernelInit& init) {
  const ir::LayerNormView v(init.node);
  ASSIGN_OR_RETURN(
      LayerNormForward core,
      LayerNormForward::make(init.ctx, specOf(v.x()->type(), v.eps()), init.node.describe()));
  return std::make_unique<LayerNormKernel>(std::move(core));
}

KernelOr makeLayerNormBackwardKernel(const KernelInit& init) {
  const ir::LayerNormBackwardView v(init.node);
  ASSIGN_OR_RETURN(
      LayerNormBackward core,
      LayerNormBackward::make(init.ctx, specOf(v.x()->type(), v.eps()), init.node.describe()));
  return std::make_unique<LayerNormBackwardKernel>(std::move(core));
}

}  // namespace tandem::backend::cpu
