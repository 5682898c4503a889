// sgd_update and sgd_update_group: the in-place SGD step. They have no results; they
// write their weight and momentum operand views, which point at the variables' storage
// (sgd_update: w in[0] and m in[2], present iff momentum > 0; the group: ir/updates.h),
// and read the schedule's learning-rate factor, their last operand when they have one.
// adamw_update and adamw_update_group: AdamW's step over the AdamW core
// (backend/cpu/adamw_core.h), in place on w, m, v and the step count.
// sgd_update_shard and adamw_update_shard (shard-weight-update): the same steps over a
// device's flat shard, on a copy of the packed weight shard, their result.

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/clip_math.h"
#include "backend/cpu/adamw_core.h"
#include "backend/cpu/kernels.h"
#include "backend/sgd_checks.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

// The step over one parameter's n values. G: the gradient's element type, float, or bf16
// when it was all-reduced in bf16 (allreduce-dtype=bf16); it is read into float, so the
// step itself is the f32 one. m is null without momentum. kDecay: weight_decay != 0;
// without it there is no decay term at all, as in PyTorch (0 * w is NaN for an infinite
// weight, which the step would then have made NaN).
template <bool kDecay, typename G>
void sgdLoop(float* __restrict w, const G* __restrict g, float* __restrict m, int64_t n, float lr,
             float mu, float wd) {
  // w, g and m are distinct tensors (two variables and a gradient), so __restrict holds
  // and the loops vectorize without alias checks.
  auto grad = [&](int64_t i) {
    const float gi = g[i];
    if constexpr (kDecay) return gi + wd * w[i];
    return gi;
  };
  if (m != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      float d = grad(i);
      float v = mu * m[i] + d;
      m[i] = v;
      w[i] -= lr * v;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * grad(i);
  }
}

template <typename G>
void sgdStep(float* w, const G* g, float* m, int64_t n, float lr, float mu, float wd) {
  if (wd != 0.0f)
    sgdLoop<true>(w, g, m, n, lr, mu, wd);
  else
    sgdLoop<false>(w, g, m, n, lr, mu, wd);
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

/// adamw_update_group: adamw_update's step over each of its k parameters in turn, each
/// with its own count (the group saves the executor's per-node work, and changes no bit).
template <typename G>
class AdamwUpdateGroupKernel final : public CpuKernel {
 public:
  AdamwUpdateGroupKernel(AdamWHyper h, std::vector<AdamwGroupOperands> params, size_t lr_scale)
      : h_(h), params_(std::move(params)), lr_scale_(lr_scale) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    const float* factor = lrFactor(in, lr_scale_);
    for (const AdamwGroupOperands& p : params_) {
      float& step = in[p.step].f32()[0];
      const AdamWScalars s = adamwScalarsAt(h_, factor, step);
      step += 1;
      adamwUpdate(in[p.w].f32(), in[p.g].as<G>(), in[p.m].f32(), in[p.v].f32(),
                  in[p.w].numElements(), s);
    }
  }

 private:
  AdamWHyper h_;
  std::vector<AdamwGroupOperands> params_;
  size_t lr_scale_;
};

/// y = w, where the plan did not place y over w (a flat-shard update steps a copy: its
/// weight shard is a packed value that the all_gather reads after it, not a variable).
float* steppedCopy(const TensorView& w, const TensorView& y) {
  if (y.f32() != w.f32())
    std::memcpy(y.f32(), w.f32(), static_cast<size_t>(w.numElements()) * sizeof(float));
  return y.f32();
}

/// sgd_update_shard: sgd_update's step (the same sgdStep) on a copy of the weight shard.
template <typename G>
class SgdUpdateShardKernel final : public CpuKernel {
 public:
  SgdUpdateShardKernel(Hyper h, size_t lr_scale) : h_(h), lr_scale_(lr_scale) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const bool momentum = h_.momentum > 0;
    sgdStep(steppedCopy(in[0], out[0]), in[1].as<G>(), momentum ? in[2].f32() : nullptr,
            in[0].numElements(), static_cast<float>(scaledLr(h_.lr, lrFactor(in, lr_scale_))),
            static_cast<float>(h_.momentum), static_cast<float>(h_.weight_decay));
  }

 private:
  Hyper h_;
  size_t lr_scale_;
};

/// adamw_update_shard: adamw_update's step (the same core and scalars) on a copy of the
/// weight shard; the bucket's count stands for each of its parameters' counts.
template <typename G>
class AdamwUpdateShardKernel final : public CpuKernel {
 public:
  AdamwUpdateShardKernel(AdamWHyper h, size_t lr_scale) : h_(h), lr_scale_(lr_scale) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::AdamwUpdateShardView;
    float& step = in[V::kStep].f32()[0];
    const AdamWScalars s = adamwScalarsAt(h_, lrFactor(in, lr_scale_), step);
    step += 1;
    adamwUpdate(steppedCopy(in[V::kW], out[0]), in[V::kG].as<G>(), in[V::kM].f32(), in[V::kV].f32(),
                in[V::kW].numElements(), s);
  }

 private:
  AdamWHyper h_;
  size_t lr_scale_;
};

/// clip_grad_norm: the squares summed in double in element order (one thread: the sum's
/// order is the factor's bits, and every device must make the same), then each gradient
/// scaled by the factor into its result, in its dtype.
class ClipGradNormKernel final : public CpuKernel {
 public:
  explicit ClipGradNormKernel(double max_norm) : max_norm_(max_norm) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    double sum = 0;
    for (const TensorView& g : in)
      withFloatType(g.type.dtype, [&](auto t) {
        using T = decltype(t);
        const T* x = g.as<T>();
        for (int64_t i = 0, n = g.numElements(); i < n; ++i) {
          const double v = static_cast<float>(x[i]);
          sum += v * v;
        }
        return 0;
      });
    const float factor = clipFactor(max_norm_, sum);
    for (size_t k = 0; k < in.size(); ++k)
      withFloatType(in[k].type.dtype, [&](auto t) {
        using T = decltype(t);
        const T* x = in[k].as<T>();
        T* y = out[k].as<T>();
        for (int64_t i = 0, n = in[k].numElements(); i < n; ++i)
          y[i] = T(static_cast<float>(x[i]) * factor);
        return 0;
      });
  }

 private:
  double max_norm_;
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

KernelOr makeAdamwUpdateGroupKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkUpdateGroup(node, "CPU"));
  std::vector<AdamwGroupOperands> params = adamwGroupOperands(node);
  return withFloatType(node.operand(params[0].g)->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<AdamwUpdateGroupKernel<decltype(g)>>(
        adamwHyper(node), std::move(params), lrScaleOperand(node));
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
  RETURN_IF_ERROR(checkUpdateGroup(node, "CPU"));
  const ir::SgdGroupLayout layout = ir::sgdGroupLayout(node);
  return withFloatType(node.operand(layout.gradient(0))->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<SgdUpdateGroupKernel<decltype(g)>>(Hyper(node), layout,
                                                                lrScaleOperand(node));
  });
}

KernelOr makeSgdUpdateShardKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdate(node, "CPU"));
  return withFloatType(node.operand(1)->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<SgdUpdateShardKernel<decltype(g)>>(Hyper(node), lrScaleOperand(node));
  });
}

KernelOr makeAdamwUpdateShardKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkAdamwUpdate(node, "CPU"));
  return withFloatType(node.operand(ir::AdamwUpdateShardView::kG)->type().dtype,
                       [&](auto g) -> KernelOr {
                         return std::make_unique<AdamwUpdateShardKernel<decltype(g)>>(
                             adamwHyper(node), lrScaleOperand(node));
                       });
}

}  // namespace tandem::backend::cpu

namespace tandem::backend::cpu {

KernelOr makeClipGradNormKernel(const KernelInit& init) {
  for (const ir::Value* g : init.node.operands())
    if (g->type().dtype != ir::DType::kF32 && g->type().dtype != ir::DType::kBF16)
      return absl::UnimplementedError(absl::StrCat(init.node.describe(),
                                                   ": the CPU kernel clips f32 or bf16 "
                                                   "gradients, not %",
                                                   g->name(), " of ", ir::dtypeName(g->type().dtype)));
  return std::make_unique<ClipGradNormKernel>(ir::ClipGradNormView(init.node).max_norm());
}

}  // namespace tandem::backend::cpu
