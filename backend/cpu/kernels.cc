#include "backend/cpu/kernels.h"

#include "absl/strings/str_cat.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/cpu/dnnl_util.h"
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
  KernelInit init{node, ctx, blocked};
  if (absl::Status s = checkBf16Support(node); !s.ok()) return s;
  KernelOr kernel = absl::InternalError(absl::StrCat("unknown op in ", node.describe()));
  switch (node.op()) {
#define OP(Enum, name, operands, attrs, traits, doc) \
  case ir::Op::k##Enum:                              \
    kernel = make##Enum##Kernel(init);               \
    break;
#include "ir/ops.def"
#undef OP
  }
  if (kernel.ok()) (*kernel)->setDescription(node.describe());
  return kernel;
}

absl::Status notAKernel(const ir::Node& node) {
  return absl::InternalError(
      absl::StrCat(node.describe(), " has no CPU kernel: the runtime executes it itself"));
}

}  // namespace tandem::backend::cpu
