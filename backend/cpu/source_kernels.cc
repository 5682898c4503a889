// constant, initialize and assign: the ops that bring values into a graph or write them
// out to a variable.

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/cpu/kernels.h"
#include "backend/initializers.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

template <typename T>
class ConstantKernel final : public CpuKernel {
 public:
  explicit ConstantKernel(T value) : value_(value) {}

  void compute(absl::Span<const TensorView>, absl::Span<const TensorView> out) override {
    T* y = static_cast<T*>(out[0].data);
    int64_t n = out[0].numElements();
    for (int64_t i = 0; i < n; ++i) y[i] = value_;
  }

 private:
  T value_;
};

// Recomputes the value on every run from (seed, name): it holds no generator state, so a
// second run of the init graph gives the same parameters again.
class InitializeKernel final : public CpuKernel {
 public:
  InitializeKernel(ir::Var var, uint64_t seed) : var_(std::move(var)), seed_(seed) {}

  void compute(absl::Span<const TensorView>, absl::Span<const TensorView> out) override {
    fillInitializer(var_, seed_, out[0].data);
  }

 private:
  ir::Var var_;  // a copy: the kernel must not depend on the module outliving it
  uint64_t seed_;
};

// assign has no results in the IR, so the runtime passes the destination as the one
// `out` view: out[0] is the device's replica of the variable `var`, in[0] the value.
class AssignKernel final : public CpuKernel {
 public:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    assert(out.size() == 1 && out[0].bytes() == in[0].bytes());
    if (out[0].data == in[0].data) return;
    std::memcpy(out[0].data, in[0].data, static_cast<size_t>(in[0].bytes()));
  }
};

absl::StatusOr<const ir::Var*> findVar(const ir::Node& node) {
  const std::string& name = ir::attr::var(node);
  const ir::Var* var = node.graph()->module()->findVar(name);
  if (var == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), " refers to unknown variable @", name));
  return var;
}

}  // namespace

KernelOr makeConstantKernel(const KernelInit& init) {
  double value = ir::attr::value(init.node);
  switch (ir::DType t = init.node.result()->type().dtype) {
    case ir::DType::kF32:
      return std::make_unique<ConstantKernel<float>>(static_cast<float>(value));
    case ir::DType::kI32:
      // Converting a fraction or an out-of-range double would be silently wrong (or UB).
      if (std::trunc(value) != value || value < INT32_MIN || value > INT32_MAX)
        return absl::InvalidArgumentError(
            absl::StrCat(init.node.describe(), ": value ", value, " is not an i32"));
      return std::make_unique<ConstantKernel<int32_t>>(static_cast<int32_t>(value));
    default:
      return absl::UnimplementedError(absl::StrCat(
          init.node.describe(), ": the CPU kernel supports f32 and i32, not ", ir::dtypeName(t)));
  }
}

KernelOr makeInitializeKernel(const KernelInit& init) {
  auto var = findVar(init.node);
  if (!var.ok()) return var.status();
  if (absl::Status s = checkInitializer(**var); !s.ok())
    return absl::Status(s.code(), absl::StrCat(init.node.describe(), ": ", s.message()));
  ir::Var replica = **var;  // a sharded variable's initializer fills this device's shard
  replica.type = init.node.result()->type();
  return std::make_unique<InitializeKernel>(std::move(replica), init.ctx.seed());
}

KernelOr makeAssignKernel(const KernelInit& init) {
  if (auto var = findVar(init.node); !var.ok()) return var.status();
  return std::make_unique<AssignKernel>();
}

}  // namespace tandem::backend::cpu
