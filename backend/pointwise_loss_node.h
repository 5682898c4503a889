#pragma once

// What both backends' pointwise-loss kernels (mse_loss, l1_loss, smooth_l1_loss,
// bce_with_logits and their backward ops) read from their node: the divisor of a mean, the
// per-element parameter when no pos_weight gives it, where pos_weight is; and the f32
// operands they take.

#include <cstddef>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"
#include "ir/kernel_ops.h"
#include "ir/op_views.h"

namespace tandem::backend {

struct PointwiseLossSpec {
  double divisor = 1.0;
  double param = 0.0;   // NameMath::defaultParam(beta)
  int pos_weight = -1;  // operand index, -1: absent
};

/// The spec of `node`, whose pos_weight, when present, is operand `pos_weight_operand`.
template <typename Math>
PointwiseLossSpec pointwiseLossSpecOf(const ir::Node& node, size_t pos_weight_operand) {
  const ir::OpInfo& info = node.info();
  double beta = 0;
  for (size_t a = 0; a < info.attrs.size(); ++a)
    if (info.attrs[a].name == "beta") beta = std::get<double>(node.attrs()[a]);
  return PointwiseLossSpec{.divisor = ir::attr::reduction(node) == ir::Reduction::kMean
                                          ? static_cast<double>(ir::attr::divisor(node))
                                          : 1.0,
                           .param = Math::defaultParam(beta),
                           .pos_weight = node.numOperands() > pos_weight_operand
                                             ? static_cast<int>(pos_weight_operand)
                                             : -1};
}

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
