// compare, where, mod and mod_backward: own loops over broadcast_index.h's maps and
// select_math.h's per-element math, which the CUDA kernels run too. Why not oneDNN's
// binary: 2.6 broadcasts only its second source, has no select and no remainder, and its
// comparisons write the result type's 1 and 0 only for some dtypes; these ops carry masks
// (ONNX's Equal, Where and Mod of activations), not a network's bulk.

#include <array>
#include <memory>

#include "backend/bf16.h"
#include "backend/broadcast_index.h"
#include "backend/cpu/kernels.h"
#include "backend/select_math.h"
#include "backend/select_node.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

/// One operand read through its map, f32 or bf16.
struct Source {
  BroadcastMap map;
  bool bf16 = false;
  bool identity = false;

  float at(const TensorView& v, int64_t i) const {
    const int64_t j = identity ? i : map.source(i);
    return bf16 ? static_cast<float>(v.as<backend::bf16>()[j]) : v.f32()[j];
  }
};

/// The node's operands' sources, broadcast to its result.
absl::StatusOr<std::vector<Source>> sourcesOf(const ir::Node& n) {
  std::vector<Source> sources;
  for (const ir::Value* x : n.operands()) {
    ASSIGN_OR_RETURN(BroadcastMap m,
                     broadcastMap(x->type().shape, n.result()->type().shape, n.describe()));
    sources.push_back(
        Source{.map = m, .bf16 = x->type().dtype == ir::DType::kBF16, .identity = m.identity()});
  }
  return sources;
}

/// y[i] = f(operands at i) for a compare/mod (two operands) or where/mod_backward (three).
template <typename Y, typename F>
class SelectKernel final : public CpuKernel {
 public:
  SelectKernel(std::vector<Source> sources, F f) : sources_(std::move(sources)), f_(f) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    Y* y = out[0].as<Y>();
    const int64_t n = out[0].numElements();
    const size_t k = sources_.size();
    // Every element on its own: the same bits however the threads cut it.
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      std::array<float, 3> v{};
      for (size_t s = 0; s < k; ++s) v[s] = sources_[s].at(in[s], i);
      y[i] = f_(v);
    }
  }

 private:
  std::vector<Source> sources_;
  F f_;
};

template <typename F>
KernelOr selectKernel(const KernelInit& init, F f) {
  ASSIGN_OR_RETURN(std::vector<Source> sources, sourcesOf(init.node));
  return withFloatType(init.node.result()->type().dtype, [&](auto tag) -> KernelOr {
    return std::make_unique<SelectKernel<decltype(tag), F>>(std::move(sources), f);
  });
}

KernelOr binaryKernel(const KernelInit& init, BinaryFn fn) {
  return selectKernel(init,
                      [fn](const std::array<float, 3>& v) { return binaryValue(fn, v[0], v[1]); });
}

}  // namespace

KernelOr makeCompareKernel(const KernelInit& init) {
  return binaryKernel(init, binaryFnOf(init.node));
}
KernelOr makeModKernel(const KernelInit& init) { return binaryKernel(init, binaryFnOf(init.node)); }
KernelOr makeWhereKernel(const KernelInit& init) {
  return selectKernel(init,
                      [](const std::array<float, 3>& v) { return whereValue(v[0], v[1], v[2]); });
}
KernelOr makeModBackwardKernel(const KernelInit& init) {
  const bool fmod = ir::attr::fmod(init.node);
  return selectKernel(init, [fmod](const std::array<float, 3>& v) {
    return modBackwardValue(v[0], v[1], v[2], fmod);
  });
}

}  // namespace tandem::backend::cpu
