// attention and its backward op on CPU: the attention core's tiles (attention_core.h,
// over oneDNN's sgemm). The dropout mask's constants come from the node; the step is
// @step's value, read when the kernel runs, as dropout's kernel does.

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/attention_node.h"
#include "backend/cpu/attention_core.h"
#include "backend/cpu/kernels.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

AttentionDropout dropoutOf(const AttentionNode& a) {
  return AttentionDropout{.on = a.dropout, .mask = a.mask, .first_sample = a.first_sample};
}

/// The dropout at this run's step (operand `step` when there is one).
AttentionDropout atStep(AttentionDropout drop, absl::Span<const TensorView> in, size_t step) {
  if (drop.on) drop.mask = drop.mask.atStep(in[step].i32());
  return drop;
}

class AttentionKernel final : public CpuKernel {
 public:
  AttentionKernel(const AttentionSizes& d, const AttentionDropout& drop) : d_(d), drop_(drop) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::AttentionView;
    attentionForward(d_, atStep(drop_, in, V::kStep), in[V::kQ].f32(), in[V::kK].f32(),
                     in[V::kV].f32(), out[0].f32(), out[1].f32());
  }

 private:
  AttentionSizes d_;
  AttentionDropout drop_;
};

class AttentionBackwardKernel final : public CpuKernel {
 public:
  AttentionBackwardKernel(const AttentionSizes& d, const AttentionDropout& drop)
      : d_(d), drop_(drop) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::AttentionBackwardView;
    attentionBackward(d_, atStep(drop_, in, V::kStep), in[V::kDy].f32(), in[V::kQ].f32(),
                      in[V::kK].f32(), in[V::kV].f32(), in[V::kY].f32(), in[V::kLse].f32(),
                      out[0].f32(), out[1].f32(), out[2].f32());
  }

 private:
  AttentionSizes d_;
  AttentionDropout drop_;
};

/// position[0] (every row holds the same), checked against the cache's `rows`: an error of
/// the launch naming the node (CpuKernel::launch turns the exception into its status).
int64_t positionIn(const TensorView& position, int64_t rows) {
  const int64_t p = position.i32()[0];
  if (p < 0 || p >= rows)
    throw std::out_of_range(absl::StrCat("position ", p, " is outside the cache's ", rows,
                                         " tokens (the model's context)"));
  return p;
}

class KvWriteKernel final : public CpuKernel {
 public:
  KvWriteKernel(int64_t batch, int64_t rows, int64_t width)
      : batch_(batch), rows_(rows), width_(width) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::KvWriteView;
    const int64_t p = positionIn(in[V::kPosition], rows_);
    float* cache = in[V::kCache].f32();  // the variable, written in place
    const float* x = in[V::kX].f32();
    for (int64_t n = 0; n < batch_; ++n)
      std::copy(x + n * width_, x + (n + 1) * width_, cache + (n * rows_ + p) * width_);
    std::copy(cache, cache + batch_ * rows_ * width_, out[0].f32());
  }

 private:
  int64_t batch_, rows_, width_;
};

class AttentionCachedKernel final : public CpuKernel {
 public:
  explicit AttentionCachedKernel(const AttentionSizes& d)
      : d_(d), scores_(static_cast<size_t>(d.key_rows)) {}

  // One query row per head over the keys up to the position (attentionSingleQuery, the
  // core's vectorized loops): its cost is the keys it reads; the tiled core's products
  // would cost their calls, the same at every position, for a single row.
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    using V = ir::AttentionCachedView;
    const AttentionSizes& d = d_;
    const int64_t keys = positionIn(in[V::kPosition], d.key_rows) + 1;
    const int64_t qs = d.heads * d.depth, vs = d.heads * d.value_depth;
    for (int64_t n = 0; n < d.batch; ++n)
      for (int64_t h = 0; h < d.heads; ++h)
        attentionSingleQuery(keys, d.depth, d.value_depth, d.scale,
                             in[V::kQ].f32() + n * qs + h * d.depth,
                             in[V::kK].f32() + n * d.key_rows * qs + h * d.depth, qs,
                             in[V::kV].f32() + n * d.key_rows * vs + h * d.value_depth, vs,
                             out[0].f32() + n * vs + h * d.value_depth, scores_.data());
  }

 private:
  AttentionSizes d_;
  std::vector<float> scores_;  // one row's scores over the cache
};

}  // namespace

KernelOr makeKvWriteKernel(const KernelInit& init) {
  const ir::Shape& cache = ir::KvWriteView(init.node).cache()->type().shape;
  return std::make_unique<KvWriteKernel>(cache[0], cache[1], cache[2]);
}

KernelOr makeAttentionCachedKernel(const KernelInit& init) {
  AttentionSizes d = attentionNodeOf(ir::AttentionCachedView(init.node), 0);
  d.key_rows = d.keys;  // the cache's length; each step sees its first position + 1 keys
  return std::make_unique<AttentionCachedKernel>(d);
}

KernelOr makeAttentionKernel(const KernelInit& init) {
  const AttentionNode a = attentionNodeOf(ir::AttentionView(init.node), init.ctx.seed());
  return std::make_unique<AttentionKernel>(a, dropoutOf(a));
}

KernelOr makeAttentionBackwardKernel(const KernelInit& init) {
  const AttentionNode a = attentionNodeOf(ir::AttentionBackwardView(init.node), init.ctx.seed());
  return std::make_unique<AttentionBackwardKernel>(a, dropoutOf(a));
}

}  // namespace tandem::backend::cpu
