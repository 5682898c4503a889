// The pointwise losses (class pointwise_loss: mse_loss, l1_loss, smooth_l1_loss,
// bce_with_logits) and their backward ops: one loop per op over the elements with its
// NameMath (backend/pointwise_loss_math.h, which the CUDA kernels run too), the loss
// summed in double in element order and divided by the divisor once. The spec's class
// list instantiates the factories; a missing NameMath does not compile.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cpu/kernels.h"
#include "backend/pointwise_loss_math.h"
#include "backend/pointwise_loss_node.h"
#include "ir/kernel_ops.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

/// The element's parameter: pos_weight broadcast over the leading axes, else the default.
struct ElementParam {
  const float* pos_weight;
  int64_t size;
  double fallback;
  double at(int64_t i) const {
    return pos_weight != nullptr ? static_cast<double>(pos_weight[i % size]) : fallback;
  }
};

ElementParam paramOf(const PointwiseLossSpec& s, absl::Span<const TensorView> in) {
  if (s.pos_weight < 0) return {nullptr, 1, s.param};
  const TensorView& p = in[static_cast<size_t>(s.pos_weight)];
  return {p.f32(), p.numElements(), s.param};
}

template <typename Math>
class PointwiseLossKernel final : public CpuKernel {
 public:
  explicit PointwiseLossKernel(const PointwiseLossSpec& spec) : spec_(spec) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* x = in[0].f32();
    const float* t = in[1].f32();
    const ElementParam p = paramOf(spec_, in);
    double sum = 0;
    for (int64_t i = 0, n = in[0].numElements(); i < n; ++i)
      sum += Math::forward(x[i], t[i], p.at(i));
    *out[0].f32() = static_cast<float>(sum / spec_.divisor);
  }

 private:
  PointwiseLossSpec spec_;
};

template <typename Math>
class PointwiseLossBackwardKernel final : public CpuKernel {
 public:
  explicit PointwiseLossBackwardKernel(const PointwiseLossSpec& spec) : spec_(spec) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* x = in[0].f32();
    const float* t = in[1].f32();
    const double scale = static_cast<double>(*in[2].f32()) / spec_.divisor;
    const ElementParam p = paramOf(spec_, in);
    float* dx = out[0].f32();
    for (int64_t i = 0, n = in[0].numElements(); i < n; ++i)
      dx[i] = Math::backward(x[i], t[i], p.at(i), scale);
  }

 private:
  PointwiseLossSpec spec_;
};

}  // namespace

// x, target[, pos_weight] forward; x, target, dloss[, pos_weight] backward.
#define TANDEM_CPU_POINTWISE_LOSS_FACTORIES(Name)                                          \
  KernelOr make##Name##Kernel(const KernelInit& init) {                                    \
    if (absl::Status s = checkF32Operands(init.node, "the CPU kernel"); !s.ok()) return s; \
    return std::make_unique<PointwiseLossKernel<Name##Math>>(                              \
        pointwiseLossSpecOf<Name##Math>(init.node, 2));                                    \
  }                                                                                        \
  KernelOr make##Name##BackwardKernel(const KernelInit& init) {                            \
    if (absl::Status s = checkF32Operands(init.node, "the CPU kernel"); !s.ok()) return s; \
    return std::make_unique<PointwiseLossBackwardKernel<Name##Math>>(                      \
        pointwiseLossSpecOf<Name##Math>(init.node, 3));                                    \
  }
TANDEM_POINTWISE_LOSS_OPS(TANDEM_CPU_POINTWISE_LOSS_FACTORIES)
#undef TANDEM_CPU_POINTWISE_LOSS_FACTORIES

}  // namespace tandem::backend::cpu
