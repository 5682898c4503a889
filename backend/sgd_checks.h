#pragma once

// What every backend's optimizer-update kernels check of their node before they are made:
// the dtypes the kernels take, sgd_update's momentum buffer's presence (the shape rule
// ties it to momentum > 0; a kernel built from an unverified node must still not touch a
// buffer that is not there) and adamw_update's operand count and step count; and the
// learning rate a launch uses under a schedule.

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backend/adamw_math.h"
#include "backend/tensor_view.h"
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

/// The schedule's factor a launch reads (operand `at`, from lrScaleOperand; host memory on
/// a CPU, device memory on a GPU), or null without one.
inline const float* lrFactor(absl::Span<const TensorView> in, size_t at) {
  return at == SIZE_MAX ? nullptr : in[at].f32();
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

/// The checks of a grouped update (sgd_update_group, adamw_update_group): operands that make
/// k parameters' streams, f32 weights and states, and one gradient dtype (f32 or bf16) for
/// the whole group, which the kernels are instantiated for; one-element update counts.
inline absl::Status checkUpdateGroup(const ir::Node& node, absl::string_view kind) {
  const ir::UpdateView u = *ir::UpdateView::of(node);
  const size_t k = u.numParams();
  if (k == 0)
    return absl::InvalidArgumentError(absl::StrCat(node.describe(), ": ", node.numOperands(),
                                                   " operands do not make ", u.streams(),
                                                   " x k (k weights, k gradients and their ",
                                                   u.presentStates().size(), " states each)"));
  const ir::DType grad = u.grad(0)->type().dtype;
  for (size_t i = 0; i < node.numOperands(); ++i) {
    const bool gradient = i >= u.gradOperand(0) && i < u.gradOperand(0) + k;
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
  for (size_t s = 0; s < u.presentStates().size(); ++s) {
    if (!u.info().states[u.presentStates()[s]].scalar) continue;
    for (size_t j = 0; j < k; ++j)
      if (const ir::Value* c = node.operand(u.stateOperand(j, s)); c->type().numElements() != 1)
        return absl::InvalidArgumentError(absl::StrCat(node.describe(), ": state %", c->name(),
                                                       " must be one element, not ",
                                                       ir::toString(c->type())));
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

/// Where one parameter's operands are in an adamw_update_group node.
struct AdamwGroupOperands {
  size_t w, g, m, v, step;
};

/// Each parameter's operands of a checked adamw_update_group (checkUpdateGroup).
inline std::vector<AdamwGroupOperands> adamwGroupOperands(const ir::Node& node) {
  const ir::UpdateView u = *ir::UpdateView::of(node);
  std::vector<AdamwGroupOperands> out;
  for (size_t j = 0; j < u.numParams(); ++j)  // states m, v, step: ops.td's order
    out.push_back({u.paramOperand(j), u.gradOperand(j), u.stateOperand(j, 0),
                   u.stateOperand(j, 1), u.stateOperand(j, 2)});
  return out;
}

/// The attributes of adamw_update or adamw_update_group as the AdamW cores take them.
inline AdamWHyper adamwHyper(const ir::Node& node) {
  return {.lr = ir::attr::lr(node),
          .beta1 = ir::attr::beta1(node),
          .beta2 = ir::attr::beta2(node),
          .eps = ir::attr::eps(node),
          .weight_decay = ir::attr::weight_decay(node)};
}

}  // namespace tandem::backend
