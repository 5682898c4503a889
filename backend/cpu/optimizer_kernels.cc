// sgd_update and sgd_update_group: the in-place SGD step. They have no results; they
// write their weight and momentum operand views, which point at the variables' storage
// (sgd_update: w in[0] and m in[2], present iff momentum > 0; the group: ir/updates.h).
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

/// Hyperparameters as the node's attributes rounded to f32.
struct Hyper {
  explicit Hyper(const ir::Node& node)
      : lr(static_cast<float>(ir::attr::lr(node))),
        momentum(static_cast<float>(ir::attr::momentum(node))),
        weight_decay(static_cast<float>(ir::attr::weight_decay(node))) {}
  float lr, momentum, weight_decay;
};

template <typename G>
class SgdUpdateKernel final : public CpuKernel {
 public:
  explicit SgdUpdateKernel(Hyper h) : h_(h) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    sgdStep(in[0].f32(), in[1].as<G>(), in.size() > 2 ? in[2].f32() : nullptr, in[0].numElements(),
            h_.lr, h_.momentum, h_.weight_decay);
  }

 private:
  Hyper h_;
};

/// sgd_update_group: the same step over each of its k parameters in turn (on a CPU the
/// group saves only the executor's per-node work; the GPU's saves launches).
template <typename G>
class SgdUpdateGroupKernel final : public CpuKernel {
 public:
  SgdUpdateGroupKernel(Hyper h, ir::SgdGroupLayout layout) : h_(h), layout_(layout) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    for (size_t j = 0; j < layout_.k; ++j) {
      const TensorView& w = in[layout_.weight(j)];
      sgdStep(w.f32(), in[layout_.gradient(j)].as<G>(),
              layout_.momentum ? in[layout_.buffer(j)].f32() : nullptr, w.numElements(), h_.lr,
              h_.momentum, h_.weight_decay);
    }
  }

 private:
  Hyper h_;
  ir::SgdGroupLayout layout_;
};

/// adamw_update: the step count (an f32[1] variable, in[4]) goes up by one, and the
/// update's scalars are made from it on the host each launch, in double as PyTorch makes
/// them from its Python floats (backend/adamw_math.h).
template <typename G>
class AdamwUpdateKernel final : public CpuKernel {
 public:
  explicit AdamwUpdateKernel(AdamWHyper h) : h_(h) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    using V = ir::AdamwUpdateView;
    float& step = in[V::kStep].f32()[0];
    step += 1;  // f32 as PyTorch's state['step'] (exact up to 2^24 updates)
    adamwUpdate(in[V::kW].f32(), in[V::kG].as<G>(), in[V::kM].f32(), in[V::kV].f32(),
                in[V::kW].numElements(), adamwScalars(h_, static_cast<int64_t>(step)));
  }

 private:
  AdamWHyper h_;
};

}  // namespace

KernelOr makeAdamwUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkAdamwUpdate(node, "CPU"));
  return withFloatType(node.operand(ir::AdamwUpdateView::kG)->type().dtype,
                       [&](auto g) -> KernelOr {
                         return std::make_unique<AdamwUpdateKernel<decltype(g)>>(adamwHyper(node));
                       });
}

KernelOr makeSgdUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdate(node, "CPU"));
  return withFloatType(node.operand(1)->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<SgdUpdateKernel<decltype(g)>>(Hyper(node));
  });
}

KernelOr makeSgdUpdateGroupKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdateGroup(node, "CPU"));
  const ir::SgdGroupLayout layout = ir::sgdGroupLayout(node);
  return withFloatType(node.operand(layout.gradient(0))->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<SgdUpdateGroupKernel<decltype(g)>>(Hyper(node), layout);
  });
}

}  // namespace tandem::backend::cpu
