#pragma once

// A check every backend's kernels of f32-only ops make of their node before they are made.

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem::backend {

/// OK when every operand of `node` is f32; else Unimplemented naming the node, `kernel`
/// ("the CPU kernel") and the operand's type.
inline absl::Status checkF32Operands(const ir::Node& node, absl::string_view kernel) {
  for (size_t i = 0; i < node.numOperands(); ++i)
    if (node.operand(i)->type().dtype != ir::DType::kF32)
      return absl::UnimplementedError(absl::StrCat(node.describe(), ": ", kernel,
                                                   " takes f32 operands, not ",
                                                   ir::toString(node.operand(i)->type())));
  return absl::OkStatus();
}

}  // namespace tandem::backend
