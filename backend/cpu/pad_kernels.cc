// pad and pad_backward: loops over backend/pad_math.h's index math, the same the CUDA
// kernels run. Forward, one output element at a time (its source, or the value); backward,
// one input element at a time, adding dy of the outputs that read it in their order (no
// scatter, so the elements split over threads without races and the sums are the same
// bits however they are split). Memory bound; oneDNN has no padding primitive.

#include <memory>

#include "backend/bf16.h"
#include "backend/cpu/kernels.h"
#include "backend/pad_node.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

template <typename T>
class PadKernel final : public CpuKernel {
 public:
  PadKernel(bool backward, PadGeometry g, float value)
      : backward_(backward), g_(g), value_(value) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    T* y = out[0].as<T>();
    const int64_t n = out[0].numElements();
    if (!backward_) {
      const T* x = in[0].as<T>();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t o = 0; o < n; ++o) {
        const int64_t i = padSourceIndex(g_, o);
        y[o] = i < 0 ? static_cast<T>(value_) : x[i];
      }
      return;
    }
    const T* dy = in[0].as<T>();  // dy, x -> dx
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      forEachPadReader(g_, i, [&](int64_t o) { acc += static_cast<float>(dy[o]); });
      y[i] = static_cast<T>(acc);
    }
  }

 private:
  bool backward_;
  PadGeometry g_;
  float value_;
};

KernelOr makePad(const KernelInit& init, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  const PadGeometry g = padGeometryOf(n);
  const auto value = static_cast<float>(ir::attr::value(n));
  return withFloatType(x.dtype, [&](auto tag) -> KernelOr {
    return std::make_unique<PadKernel<decltype(tag)>>(backward, g, value);
  });
}

}  // namespace

KernelOr makePadKernel(const KernelInit& init) { return makePad(init, /*backward=*/false); }
KernelOr makePadBackwardKernel(const KernelInit& init) { return makePad(init, /*backward=*/true); }

}  // namespace tandem::backend::cpu
