#include "backend/cpu/kernels.h"

#include "absl/strings/str_cat.h"

namespace tandem::backend::cpu {

KernelOr makeKernel(const ir::Node& node, CpuContext& ctx) {
  KernelInit init{node, ctx};
  switch (node.op()) {
#define OP(Enum, name, operands, attrs, traits, doc) \
  case ir::Op::k##Enum:                              \
    return make##Enum##Kernel(init);
#include "ir/ops.def"
#undef OP
  }
  return absl::InternalError(absl::StrCat("unknown op in ", node.describe()));
}

absl::Status notAKernel(const ir::Node& node) {
  return absl::InternalError(absl::StrCat(node.describe(),
                                          " has no CPU kernel: the runtime executes it itself"));
}

}  // namespace tandem::backend::cpu
