// attention and its backward op on CPU: the attention core's tiles (attention_core.h,
// over oneDNN's sgemm). The dropout mask's constants come from the node; the step is
// @step's value, read when the kernel runs, as dropout's kernel does.

#include <memory>

#include "backend/cpu/attention_core.h"
#include "backend/cpu/kernels.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

template <typename View>
AttentionDims dimsOf(const View& v) {
  const ir::Shape &q = v.q()->type().shape, &k = v.k()->type().shape, &val = v.v()->type().shape;
  return AttentionDims{.batch = q[0],
                       .heads = v.heads(),
                       .queries = q[1],
                       .keys = k[1],
                       .depth = q[2] / v.heads(),
                       .value_depth = val[2] / v.heads(),
                       .scale = static_cast<float>(v.scale()),
                       .causal = v.causal()};
}

template <typename View>
AttentionDropout dropoutOf(const View& v, uint64_t seed) {
  if (v.step() == nullptr) return {};
  return AttentionDropout{.on = true,
                          .mask = dropoutMask(seed, 0, static_cast<uint32_t>(v.mask_id()), v.p()),
                          .first_sample = v.sample_offset()};
}

/// The dropout at this run's step (operand `step` when there is one).
AttentionDropout atStep(AttentionDropout drop, absl::Span<const TensorView> in, size_t step) {
  if (drop.on) drop.mask = drop.mask.atStep(in[step].i32());
  return drop;
}

class AttentionKernel final : public CpuKernel {
 public:
  AttentionKernel(const AttentionDims& d, const AttentionDropout& drop) : d_(d), drop_(drop) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::AttentionView;
    attentionForward(d_, atStep(drop_, in, V::kStep), in[V::kQ].f32(), in[V::kK].f32(),
                     in[V::kV].f32(), out[0].f32(), out[1].f32());
  }

 private:
  AttentionDims d_;
  AttentionDropout drop_;
};

class AttentionBackwardKernel final : public CpuKernel {
 public:
  AttentionBackwardKernel(const AttentionDims& d, const AttentionDropout& drop)
      : d_(d), drop_(drop) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::AttentionBackwardView;
    attentionBackward(d_, atStep(drop_, in, V::kStep), in[V::kDy].f32(), in[V::kQ].f32(),
                      in[V::kK].f32(), in[V::kV].f32(), in[V::kY].f32(), in[V::kLse].f32(),
                      out[0].f32(), out[1].f32(), out[2].f32());
  }

 private:
  AttentionDims d_;
  AttentionDropout drop_;
};

}  // namespace

KernelOr makeAttentionKernel(const KernelInit& init) {
  const ir::AttentionView v(init.node);
  return std::make_unique<AttentionKernel>(dimsOf(v), dropoutOf(v, init.ctx.seed()));
}

KernelOr makeAttentionBackwardKernel(const KernelInit& init) {
  const ir::AttentionBackwardView v(init.node);
  return std::make_unique<AttentionBackwardKernel>(dimsOf(v), dropoutOf(v, init.ctx.seed()));
}

}  // namespace tandem::backend::cpu
