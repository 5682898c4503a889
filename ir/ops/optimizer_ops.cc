// sgd_update and adamw_update: the in-place optimizer steps of one parameter, and their
// grouped forms (sgd_update_group, adamw_update_group): k parameters of one device in one
// node (one multi-tensor launch on GPUs); clip_grad_norm, the gradients the updates read scaled
// to a global norm.

#include <cstdint>
#include <utility>

#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"
#include "ir/updates.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// The operand indices of one parameter's step: its weight, its gradient and, with
/// momentum, its buffer (SIZE_MAX without).
struct UpdateOperands {
  size_t w, g, m;
};

/// Operand `i` is read straight from a variable of role `want` (an update writes it in place).
template <typename Describe>
absl::Status checkReadsVariable(const Node& n, size_t i, VarRole want, Describe describe) {
  const Node* def = n.operand(i)->def();
  if (def == nullptr || def->op() != Op::kParam)
    return fail(absl::StrCat(describe(i), " must be read straight from a variable (a param node)"));
  const std::string var = ParamView(*def).var();
  const Var* decl = n.graph()->module()->findVar(var);
  if (decl != nullptr && decl->role != want)
    return fail(absl::StrCat(describe(i), " reads @", var, " whose role is ",
                             varRoleName(decl->role), ", expected ", varRoleName(want)));
  return absl::OkStatus();
}

/// The checks of one step: f32 weights read from a param variable, a gradient of the
/// weight's type (or its bf16 twin: reduced in bf16 to halve the bytes on the wire, and
/// widened as the update reads it), a momentum buffer of the weight's type read from an
/// optimizer variable. `describe` names an operand in the messages.
template <typename Describe>
absl::Status checkUpdate(const Node& n, UpdateOperands u, Describe describe) {
  const TensorType& w = typeOf(n, u.w);
  if (w.dtype != DType::kF32)
    return fail(
        absl::StrCat(describe(u.w), " must be f32 (the update runs on f32 master weights)"));
  const TensorType& g = typeOf(n, u.g);
  if (g != w && g != TensorType{DType::kBF16, w.shape})
    return fail(absl::StrCat(describe(u.g), " must have the type of ", describe(u.w),
                             " (or be its bf16 twin)"));
  if (u.m != SIZE_MAX && typeOf(n, u.m) != w)
    return fail(absl::StrCat(describe(u.m), " and ", describe(u.w), " must have the same type"));
  RETURN_IF_ERROR(checkReadsVariable(n, u.w, VarRole::kParam, describe));
  if (u.m != SIZE_MAX) RETURN_IF_ERROR(checkReadsVariable(n, u.m, VarRole::kOptimizer, describe));
  return absl::OkStatus();
}

/// The learning-rate factor, when the update has one: an f32[1] read from a fed variable
/// (the runtime writes it before every step).
template <typename Describe>
absl::Status checkLrScale(const Node& n, Describe describe) {
  const UpdateView u = *UpdateView::of(n);
  if (u.lrScale() == nullptr) return absl::OkStatus();
  if (typeOf(n, u.lrScaleOperand()) != TensorType{DType::kF32, {1}})
    return fail(absl::StrCat(describe(u.lrScaleOperand()),
                             " must be f32[1] (the learning-rate schedule's factor)"));
  return checkReadsVariable(n, u.lrScaleOperand(), VarRole::kFed, describe);
}

absl::StatusOr<Types> inferSgdUpdate(const Node& n) {  // w, g, m?, lr_scale?
  const SgdUpdateView v(n);
  // m is there exactly when momentum > 0; lr_scale may follow.
  const size_t per = v.momentum() > 0 ? 3 : 2;
  if (n.numOperands() != per && n.numOperands() != per + 1)
    return fail(v.momentum() > 0
                    ? "momentum > 0 needs a momentum buffer operand m (w, g, m, lr_scale?)"
                    : "momentum is 0, so the operands are w, g and an optional lr_scale (no "
                      "momentum buffer)");
  auto describe = [&](size_t i) { return describeOperand(n, i); };
  if (n.numOperands() == per + 1 && v.lr_scale() != nullptr &&
      UpdateView::of(n)->lrScale() == nullptr)
    return fail(absl::StrCat(describe(per), " must be read straight from a variable of role "
                             "fed (the learning-rate schedule's factor)"));
  const bool has_buffer = v.m() != nullptr;
  RETURN_IF_ERROR(checkUpdate(n, {0, 1, has_buffer ? size_t{2} : SIZE_MAX}, describe));
  RETURN_IF_ERROR(checkLrScale(n, describe));
  return Types{};
}

absl::StatusOr<Types> inferSgdUpdateGroup(const Node& n) {  // ws..., gs..., ms...
  const SgdGroupLayout layout = sgdGroupLayout(n);
  if (layout.k == 0)
    return fail(absl::StrCat(n.numOperands(), " operands are not ",
                             SgdGroupLayout::streams(layout.momentum),
                             " x k (k weights, their k gradients",
                             layout.momentum ? " and their k momentum buffers, as momentum > 0"
                                             : "; no momentum buffers, as momentum is 0",
                             "; then an optional lr_scale)"));
  static constexpr const char* kRoles[] = {"weight", "gradient", "momentum buffer"};
  const size_t k = layout.k;
  auto describe = [&](size_t i) {
    const std::string role =
        i / k < SgdGroupLayout::streams(layout.momentum)
            ? absl::StrCat(kRoles[i / k], " ", i % k + 1, " of ", k)
            : std::string("lr_scale");
    return absl::StrCat(role, " (%", n.operand(i)->name(), ": ", toString(typeOf(n, i)), ")");
  };
  for (size_t j = 0; j < k; ++j)
    RETURN_IF_ERROR(checkUpdate(
        n, {layout.weight(j), layout.gradient(j), layout.momentum ? layout.buffer(j) : SIZE_MAX},
        describe));
  RETURN_IF_ERROR(checkLrScale(n, describe));
  return Types{};
}

/// The operand indices of one parameter's AdamW step.
struct AdamwOperands {
  size_t w, g, m, v, step;
};

/// One parameter's AdamW checks: those of any update for w, g and m, then v of the
/// weight's type and the f32[1] update count, both read from optimizer variables.
template <typename Describe>
absl::Status checkAdamw(const Node& n, AdamwOperands a, Describe describe) {
  RETURN_IF_ERROR(checkUpdate(n, {a.w, a.g, a.m}, describe));
  if (typeOf(n, a.v) != typeOf(n, a.w))
    return fail(absl::StrCat(describe(a.v), " and ", describe(a.w), " must have the same type"));
  RETURN_IF_ERROR(checkReadsVariable(n, a.v, VarRole::kOptimizer, describe));
  // The update count: f32 counts every step exactly up to 2^24, more than a run takes.
  if (typeOf(n, a.step) != TensorType{DType::kF32, {1}})
    return fail(absl::StrCat(describe(a.step), " must be f32[1] (the parameter's update count)"));
  return checkReadsVariable(n, a.step, VarRole::kOptimizer, describe);
}

absl::StatusOr<Types> inferAdamwUpdate(const Node& n) {  // w, g, m, v, step, lr_scale?
  using V = AdamwUpdateView;
  auto describe = [&](size_t i) { return describeOperand(n, i); };
  RETURN_IF_ERROR(checkAdamw(n, {V::kW, V::kG, V::kM, V::kV, V::kStep}, describe));
  if (V(n).lr_scale() != nullptr && UpdateView::of(n)->lrScale() == nullptr)
    return fail(absl::StrCat(describe(n.numOperands() - 1),
                             " must be read straight from a variable of role fed (the "
                             "learning-rate schedule's factor)"));
  RETURN_IF_ERROR(checkLrScale(n, describe));
  return Types{};
}

// ws..., gs..., ms..., vs..., steps..., lr_scale?
absl::StatusOr<Types> inferAdamwUpdateGroup(const Node& n) {
  const UpdateView u = *UpdateView::of(n);
  const size_t k = u.numParams();
  if (k == 0)
    return fail(absl::StrCat(n.numOperands(),
                             " operands are not 5 x k (k weights, their k gradients, k first "
                             "moments, k second moments and k update counts; then an optional "
                             "lr_scale)"));
  static constexpr const char* kRoles[] = {"weight", "gradient", "first moment",
                                           "second moment", "update count"};
  auto describe = [&](size_t i) {
    const std::string role = i / k < 5 ? absl::StrCat(kRoles[i / k], " ", i % k + 1, " of ", k)
                                       : std::string("lr_scale");
    return absl::StrCat(role, " (%", n.operand(i)->name(), ": ", toString(typeOf(n, i)), ")");
  };
  for (size_t j = 0; j < k; ++j)
    RETURN_IF_ERROR(checkAdamw(n,
                               {u.paramOperand(j), u.gradOperand(j), u.stateOperand(j, 0),
                                u.stateOperand(j, 1), u.stateOperand(j, 2)},
                               describe));
  RETURN_IF_ERROR(checkLrScale(n, describe));
  return Types{};
}

/// A flat-shard form (sgd_update_shard, adamw_update_shard; shard-weight-update): the
/// weight shard w is a flat f32 value (packed from the bucket's weights, not a variable),
/// the gradient shard its type or its bf16 twin, each present state w's type (an update
/// count: f32[1]) read straight from an optimizer variable (a sharded one); the result, the
/// stepped shard, has w's type.
absl::StatusOr<Types> inferShardUpdate(const Node& n) {
  const UpdateView u = *UpdateView::of(n);
  auto describe = [&](size_t i) { return describeOperand(n, i); };
  const size_t per = u.streams();
  if (n.numOperands() != per && n.numOperands() != per + 1)
    return fail(absl::StrCat(n.numOperands(), " operands; expected w, g, the ",
                             u.presentStates().size(),
                             " optimizer states its attributes ask for, and an optional lr_scale"));
  if (n.numOperands() == per + 1 && u.lrScale() == nullptr)
    return fail(absl::StrCat(describe(per),
                             " must be read straight from a variable of role "
                             "fed (the learning-rate schedule's factor)"));
  const TensorType& w = typeOf(n, u.paramOperand(0));
  if (w.dtype != DType::kF32 || w.rank() != 1)
    return fail(absl::StrCat(describe(u.paramOperand(0)),
                             " must be a flat f32 shard (rank 1: the bucket's weights packed)"));
  const TensorType& g = typeOf(n, u.gradOperand(0));
  if (g != w && g != TensorType{DType::kBF16, w.shape})
    return fail(absl::StrCat(describe(u.gradOperand(0)), " must have the type of ",
                             describe(u.paramOperand(0)), " (or be its bf16 twin)"));
  for (size_t s = 0; s < u.presentStates().size(); ++s) {
    const OptimizerStateSpec& spec = u.info().states[u.presentStates()[s]];
    const size_t i = u.stateOperand(0, s);
    if (typeOf(n, i) != spec.typeFor(w))
      return fail(absl::StrCat(describe(i), " must be ", toString(spec.typeFor(w)),
                               spec.scalar ? " (the bucket's update count)"
                                           : " (the shard of the packed state, as w is of the "
                                             "packed weights)"));
    RETURN_IF_ERROR(checkReadsVariable(n, i, VarRole::kOptimizer, describe));
  }
  RETURN_IF_ERROR(checkLrScale(n, describe));
  return Types{w};
}

absl::StatusOr<Types> inferClipGradNorm(const Node& n) {  // gs... -> ys...
  if (n.numOperands() == 0) return fail("takes at least one gradient");
  Types out;
  out.reserve(n.numOperands());
  for (size_t i = 0; i < n.numOperands(); ++i) out.push_back(typeOf(n, i));
  return out;
}

/// The variables written: the weights' and the momentum buffers'.
std::vector<std::string> writesVarsAt(const Node& n, std::vector<size_t> operands) {
  std::vector<std::string> out;
  for (size_t i : operands)
    if (i < n.numOperands())
      if (auto var = varReadBy(n, i); var.ok()) out.push_back(*var);
  return out;
}

std::vector<std::string> writesSgdUpdate(const Node& n) {
  if (SgdUpdateView(n).momentum() > 0)
    return writesVarsAt(n, {SgdUpdateView::kW, SgdUpdateView::kM});
  return writesVarsAt(n, {SgdUpdateView::kW});
}

std::vector<std::string> writesAdamwUpdate(const Node& n) {
  return writesVarsAt(
      n, {AdamwUpdateView::kW, AdamwUpdateView::kM, AdamwUpdateView::kV, AdamwUpdateView::kStep});
}

/// Any grouped update writes, for each parameter, its weight and every state it has.
std::vector<std::string> writesGroup(const Node& n) {
  const UpdateView u = *UpdateView::of(n);
  std::vector<size_t> written;
  for (size_t j = 0; j < u.numParams(); ++j) {
    written.push_back(u.paramOperand(j));
    for (size_t s = 0; s < u.presentStates().size(); ++s) written.push_back(u.stateOperand(j, s));
  }
  return writesVarsAt(n, std::move(written));
}

/// A flat-shard form writes its states; its weight shard is a value, stepped into y.
std::vector<std::string> writesShard(const Node& n) {
  const UpdateView u = *UpdateView::of(n);
  std::vector<size_t> written;
  for (size_t s = 0; s < u.presentStates().size(); ++s) written.push_back(u.stateOperand(0, s));
  return writesVarsAt(n, std::move(written));
}

}  // namespace

extern const OpRules kSgdUpdateShardRules{.infer = inferShardUpdate, .writes = writesShard};
extern const OpRules kAdamwUpdateShardRules{.infer = inferShardUpdate, .writes = writesShard};
extern const OpRules kSgdUpdateRules{.infer = inferSgdUpdate, .writes = writesSgdUpdate};
extern const OpRules kAdamwUpdateRules{.infer = inferAdamwUpdate, .writes = writesAdamwUpdate};
extern const OpRules kClipGradNormRules{.infer = inferClipGradNorm};
extern const OpRules kSgdUpdateGroupRules{.infer = inferSgdUpdateGroup, .writes = writesGroup};
extern const OpRules kAdamwUpdateGroupRules{.infer = inferAdamwUpdateGroup,
                                            .writes = writesGroup};

}  // namespace tandem::ir
