#include "backend/cpu/kernels.h"

#include "absl/strings/str_cat.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/cpu/dnnl_util.h"
#include "ir/plan.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {

absl::Status CpuKernel::runHere(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  try {
    compute(in, out);
  } catch (const dnnl::error& e) {  // oneDNN reports execution failures by exception
    return absl::InternalError(absl::StrCat(what_, ": oneDNN: ", e.what()));
  } catch (const std::exception& e) {  // a fused kernel's inner kernel failed
    return absl::InternalError(absl::StrCat(what_, ": ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status CpuKernel::launch(Stream& stream, absl::Span<const TensorView> in,
                               absl::Span<const TensorView> out) {
  return CpuStream::enqueueOn(stream, [this, in, out] { return runHere(in, out); });
}

KernelOr makeKernel(const ir::Node& node, CpuContext& ctx,
                    const absl::flat_hash_set<const ir::Value*>* blocked) {
  // The plan's algorithm, where choose-algorithms made one (ir/plan.h).
  const ir::GraphPlan* plan = node.graph() != nullptr ? node.graph()->plan() : nullptr;
  KernelInit init{node, ctx, blocked,
                  plan != nullptr && node.id() < plan->nodes.size()
                      ? absl::string_view(plan->of(node).algorithm)
                      : absl::string_view()};
  if (absl::Status s = checkBf16Support(node); !s.ok()) return s;
  KernelOr kernel = kernelTable().make(node, init);
  if (kernel.ok()) (*kernel)->setDescription(node.describe());
  return kernel;
}

namespace {
// The ops the CPU backend has no kernel for (none): loading one is an error naming it.
constexpr bool lacks(ir::Op) { return false; }
}  // namespace

const KernelTable<KernelInit, std::unique_ptr<CpuKernel>>& kernelTable() {
  static const auto* filled = [] {
    auto* t = new KernelTable<KernelInit, std::unique_ptr<CpuKernel>>("CPU");
    auto& table = *t;
    TANDEM_FILL_KERNEL_TABLE()
    return t;
  }();
  return *filled;
}

}  // namespace tandem::backend::cpu
