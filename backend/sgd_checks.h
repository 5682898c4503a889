#pragma once

// What every backend's optimizer-update kernels check of their node before they are made:
// the dtypes the kernels take, sgd_update's momentum buffer's presence (the shape rule
// ties it to momentum > 0; a kernel built from an unverified node must still not touch a
// buffer that is not there) and adamw_update's operand count and step count; and the
// learning rate a launch uses under a schedule.

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backend/adamw_math.h"
#include "ir/ir.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "ir/updates.h"

namespace tandem::backend {

/// The operand index of an update's learning-rate factor (ir/interfaces.h), or SIZE_MAX.
inline size_t lrScaleOperand(const ir::Node& node) {
  return ir::UpdateView::of(node)->lrScaleOperand();
}

/// The learning rate a launch uses: the attribute's, times the schedule's factor when the
/// node reads one (`at`, from lrScaleOperand). In double, then rounded once, as PyTorch
/// multiplies a Python float base lr by a LambdaLR factor.
inline double scaledLr(double lr, const float* factor) {
  return factor == nullptr ? lr : lr * static_cast<double>(*factor);
}

/// OK for f32 weights (and momentum) with an f32 or bf16 gradient and a momentum buffer
/// exactly when momentum > 0; else the error naming the node and `kind` ("CPU", "CUDA").
inline absl::Status checkSgdUpdate(const ir::Node& node, absl::string_view kind) {
  for (size_t i = 0; i < node.numOperands(); ++i)
    if (ir::DType t = node.operand(i)->type().dtype;
        t != ir::DType::kF32 && !(i == 1 && t == ir::DType::kBF16))
      return absl::UnimplementedError(absl::StrCat(node.describe(), ": the ", kind,
                                                   " kernel updates f32 weights from f32 or bf16 "
                                                   "gradients, not ",
                                                   ir::dtypeName(t), " operand ", i));
  const size_t per_param = node.numOperands() - (lrScaleOperand(node) == SIZE_MAX ? 0 : 1);
  if ((per_param > 2) != (ir::attr::momentum(node) > 0))
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": a momentum buffer is given iff momentum > 0"));
  return absl::OkStatus();
}

/// checkSgdUpdate for sgd_update_group: a layout that fits the momentum attribute, f32
/// weights and buffers, and one gradient dtype (f32 or bf16) for the whole group, which
/// the kernels are instantiated for.
inline absl::Status checkSgdUpdateGroup(const ir::Node& node, absl::string_view kind) {
  const ir::SgdGroupLayout layout = ir::sgdGroupLayout(node);
  if (layout.k == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        node.describe(), ": ", node.numOperands(), " operands do not make k weights, k gradients",
        layout.momentum ? " and k momentum buffers" : "", " (momentum is ",
        ir::attr::momentum(node), ")"));
  const ir::DType grad = node.operand(layout.gradient(0))->type().dtype;
  for (size_t i = 0; i < node.numOperands(); ++i) {
    const bool gradient = i >= layout.gradient(0) && i < layout.gradient(0) + layout.k;
    const ir::DType t = node.operand(i)->type().dtype;
    if (gradient ? (t != grad || (t != ir::DType::kF32 && t != ir::DType::kBF16))
                 : t != ir::DType::kF32)
      return absl::UnimplementedError(
          absl::StrCat(node.describe(), ": the ", kind,
                       " kernel updates f32 weights from gradients of one "
                       "dtype, f32 or bf16, not ",
                       ir::dtypeName(t), " operand ", i, " (%", node.operand(i)->name(),
                       ") beside ", ir::dtypeName(grad), " gradient 1"));
  }
  return absl::OkStatus();
}

/// OK for adamw_update's five operands: f32 weight, moments and step count (one element),
/// an f32 or bf16 gradient; else the error naming the node and `kind`.
inline absl::Status checkAdamwUpdate(const ir::Node& node, absl::string_view kind) {
  using V = ir::AdamwUpdateView;
  if (node.numOperands() != 5 && node.numOperands() != 6)
    return absl::InvalidArgumentError(
        absl::StrCat(node.describe(), ": ", node.numOperands(),
                     " operands; expected w, g, m, v, step and an optional lr_scale"));
  for (size_t i = 0; i < node.numOperands(); ++i)
    if (ir::DType t = node.operand(i)->type().dtype;
        t != ir::DType::kF32 && !(i == V::kG && t == ir::DType::kBF16))
      return absl::UnimplementedError(absl::StrCat(node.describe(), ": the ", kind,
                                                   " kernel updates f32 weights from f32 or bf16 "
                                                   "gradients, not ",
                                                   ir::dtypeName(t), " operand ", i));
  if (node.operand(V::kStep)->type().numElements() != 1)
    return absl::InvalidArgumentError(absl::StrCat(node.describe(),
                                                   ": the step count must be one element, not ",
                                                   ir::toString(node.operand(V::kStep)->type())));
  return absl::OkStatus();
}

/// adamw_update's attributes as the AdamW cores take them.
inline AdamWHyper adamwHyper(const ir::Node& node) {
  const ir::AdamwUpdateView v(node);
  return {.lr = v.lr(),
          .beta1 = v.beta1(),
          .beta2 = v.beta2(),
          .eps = v.eps(),
          .weight_decay = v.weight_decay()};
}

}  // namespace tandem::backend
