// relu, relu_backward and add: plain loops over contiguous arrays. They are memory bound,
// so a oneDNN eltwise primitive would buy nothing over what the compiler vectorizes.
// No __restrict: each element reads only its own position, so a result may share an
// operand's buffer (in-place reuse by a memory planner) and the loops stay correct.

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {
namespace {

absl::Status expectF32(const ir::Node& node, const ir::TensorType& t) {
  if (t.dtype == ir::DType::kF32) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat(node.describe(), ": the CPU kernel supports f32, not ", ir::dtypeName(t.dtype)));
}

class ReluKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* x = in[0].f32();
    float* y = out[0].f32();
    int64_t n = out[0].numElements();
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
};

// y is relu's output: y > 0 exactly where x > 0, so the mask needs no copy of x.
class ReluBackwardKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* dy = in[0].f32();
    const float* y = in[1].f32();
    float* dx = out[0].f32();
    int64_t n = out[0].numElements();
    // dy loaded either way: the conditional load of `y > 0 ? dy : 0` kept the loop scalar.
    for (int64_t i = 0; i < n; ++i) {
      const float g = dy[i];
      dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
  }
};

template <typename T>
class AddKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T* a = static_cast<const T*>(in[0].data);
    const T* b = static_cast<const T*>(in[1].data);
    T* c = static_cast<T*>(out[0].data);
    int64_t n = out[0].numElements();
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  }
};

}  // namespace

KernelOr makeReluKernel(const KernelInit& init) {
  if (absl::Status s = expectF32(init.node, init.node.result()->type()); !s.ok()) return s;
  return std::make_unique<ReluKernel>();
}

KernelOr makeReluBackwardKernel(const KernelInit& init) {
  if (absl::Status s = expectF32(init.node, init.node.result()->type()); !s.ok()) return s;
  return std::make_unique<ReluBackwardKernel>();
}

KernelOr makeAddKernel(const KernelInit& init) {
  switch (ir::DType t = init.node.result()->type().dtype) {
    case ir::DType::kF32:
      return std::make_unique<AddKernel<float>>();
    case ir::DType::kI32:
      return std::make_unique<AddKernel<int32_t>>();
    default:
      return absl::UnimplementedError(absl::StrCat(
          init.node.describe(), ": the CPU kernel supports f32 and i32, not ", ir::dtypeName(t)));
  }
}

}  // namespace tandem::backend::cpu
