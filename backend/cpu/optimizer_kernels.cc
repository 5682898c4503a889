// sgd_update and sgd_update_group: the in-place SGD step. They have no results; they
// write their weight and momentum operand views, which point at the variables' storage
// (sgd_update: w in[0] and m in[2], present iff momentum > 0; the group: ir/updates.h),
// and read the schedule's learning-rate factor, their last operand when they have one.
// adamw_update: AdamW's step over the AdamW core (backend/cpu/adamw_core.h), in place on
// w, m, v and the step count.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/cpu/adamw_core.h"
#include "backend/cpu/kernels.h"
#include "backend/sgd_checks.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

// The step over one parameter's n values. G: the gradient's element type, float, or bf16
// when it was all-reduced in bf16 (allreduce-dtype=bf16); it is read into float, so the
// step itself is the f32 one. m is null without momentum.
template <typename G>
void sgdStep(float* __restrict w, const G* __restrict g, float* __restrict m, int64_t n, float lr,
             float mu, float wd) {
  // w, g and m are distinct tensors (two variables and a gradient), so __restrict holds
  // and the loops vectorize without alias checks.
  if (m != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      float d = gi + wd * w[i];
      float v = mu * m[i] + d;
      m[i] = v;
      w[i] -= lr * v;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      w[i] -= lr * (gi + wd * w[i]);
    }
  }
}

/// Hyperparameters as the node's attributes (each launch rounds them to f32, the lr after
/// the schedule's factor).
struct Hyper {
  explicit Hyper(const ir::Node& node)
      : lr(ir::attr::lr(node)),
        momentum(ir::attr::momentum(node)),
        weight_decay(ir::attr::weight_decay(node)) {}
  double lr, momentum, weight_decay;
};

/// The schedule's factor a launch reads (operand `at`), or null without one.
const float* lrFactor(absl::Span<const TensorView> in, size_t at) {
  return at == SIZE_MAX ? nullptr : in[at].f32();
}

template <typename G>
class SgdUpdateKernel final : public CpuKernel {
 public:
  SgdUpdateKernel(Hyper h, size_t lr_scale) : h_(h), lr_scale_(lr_scale) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    const bool momentum = h_.momentum > 0;
    sgdStep(in[0].f32(), in[1].as<G>(), momentum ? in[2].f32() : nullptr, in[0].numElements(),
            static_cast<float>(scaledLr(h_.lr, lrFactor(in, lr_scale_))),
            static_cast<float>(h_.momentum), static_cast<float>(h_.weight_decay));
  }

 private:
  Hyper h_;
  size_t lr_scale_;
};

/// sgd_update_group: the same step over each of its k parameters in turn (on a CPU the
/// group saves only the executor's per-node work; the GPU's saves launches).
template <typename G>
class SgdUpdateGroupKernel final : public CpuKernel {
 public:
  SgdUpdateGroupKernel(Hyper h, ir::SgdGroupLayout layout, size_t lr_scale)
      : h_(h), layout_(layout), lr_scale_(lr_scale) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    const float lr = static_cast<float>(scaledLr(h_.lr, lrFactor(in, lr_scale_)));
    for (size_t j = 0; j < layout_.k; ++j) {
      const TensorView& w = in[layout_.weight(j)];
      sgdStep(w.f32(), in[layout_.gradient(j)].as<G>(),
              layout_.momentum ? in[layout_.buffer(j)].f32() : nullptr, w.numElements(), lr,
              static_cast<float>(h_.momentum), static_cast<float>(h_.weight_decay));
    }
  }

 private:
  Hyper h_;
  ir::SgdGroupLayout layout_;
  size_t lr_scale_;
};

/// adamw_update: the step count (an f32[1] variable, in[4]) goes up by one, and the
/// update's scalars are made from it on the host each launch, in double as PyTorch makes
/// them from its Python floats (backend/adamw_math.h).
template <typename G>
class AdamwUpdateKernel final : public CpuKernel {
 public:
  AdamwUpdateKernel(AdamWHyper h, size_t lr_scale) : h_(h), lr_scale_(lr_scale) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    using V = ir::AdamwUpdateView;
    float& step = in[V::kStep].f32()[0];
    const AdamWScalars s = adamwScalarsAt(h_, lrFactor(in, lr_scale_), step);
    step += 1;  // f32 as PyTorch's state['step'] (exact up to 2^24 updates)
    adamwUpdate(in[V::kW].f32(), in[V::kG].as<G>(), in[V::kM].f32(), in[V::kV].f32(),
                in[V::kW].numElements(), s);
  }

 private:
  AdamWHyper h_;
  size_t lr_scale_;
};

}  // namespace

KernelOr makeAdamwUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkAdamwUpdate(node, "CPU"));
  return withFloatType(node.operand(ir::AdamwUpdateView::kG)->type().dtype,
                       [&](auto g) -> KernelOr {
                         return std::make_unique<AdamwUpdateKernel<decltype(g)>>(
                             adamwHyper(node), lrScaleOperand(node));
                       });
}

KernelOr makeSgdUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdate(node, "CPU"));
  return withFloatType(node.operand(1)->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<SgdUpdateKernel<decltype(g)>>(Hyper(node), lrScaleOperand(node));
  });
}

KernelOr makeSgdUpdateGroupKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdateGroup(node, "CPU"));
  const ir::SgdGroupLayout layout = ir::sgdGroupLayout(node);
  return withFloatType(node.operand(layout.gradient(0))->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<SgdUpdateGroupKernel<decltype(g)>>(Hyper(node), layout,
                                                                lrScaleOperand(node));
  });
}

}  // namespace tandem::backend::cpu
