// sgd_update: the in-place SGD step. It has no results; it writes its operand views w
// (in[0]) and m (in[2], present iff momentum > 0), which point at the variables' storage.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cpu/bf16.h"
#include "backend/cpu/kernels.h"
#include "backend/sgd_checks.h"

namespace tandem::backend::cpu {
namespace {

// G: the gradient's element type, float, or bf16 when it was all-reduced in bf16
// (allreduce-dtype=bf16); it is read into float, so the step itself is the f32 one.
template <typename G>
class SgdUpdateKernel final : public CpuKernel {
 public:
  SgdUpdateKernel(float lr, float momentum, float weight_decay)
      : lr_(lr), momentum_(momentum), weight_decay_(weight_decay) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView>) override {
    int64_t n = in[0].numElements();
    // w, g and m are distinct tensors (two variables and a gradient), so __restrict holds
    // and the loops vectorize without alias checks.
    float* __restrict w = in[0].f32();
    const G* __restrict g = in[1].as<G>();
    const float lr = lr_, wd = weight_decay_, mu = momentum_;
    if (in.size() > 2) {
      float* __restrict m = in[2].f32();
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

 private:
  float lr_, momentum_, weight_decay_;
};

}  // namespace

KernelOr makeSgdUpdateKernel(const KernelInit& init) {
  const ir::Node& node = init.node;
  RETURN_IF_ERROR(checkSgdUpdate(node, "CPU"));
  return withFloatType(node.operand(1)->type().dtype, [&](auto g) -> KernelOr {
    return std::make_unique<SgdUpdateKernel<decltype(g)>>(
        static_cast<float>(node.floatAttr("lr")), static_cast<float>(node.floatAttr("momentum")),
        static_cast<float>(node.floatAttr("weight_decay")));
  });
}

}  // namespace tandem::backend::cpu
