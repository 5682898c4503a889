#pragma once

// Small checks shared by the shape rules in ir/ops/. Each returns an InvalidArgument
// status whose message names the operand and what was expected; Graph::create and the
// verifier prefix it with the node. An operand's own dtype (`x: float`, `labels: i32` in
// ir/ops.td) is checked before the rule runs (inferTypes); the rules relate operands.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"
#include "ir/op_views.h"

namespace tandem::ir::rules {

using Types = std::vector<TensorType>;

inline const TensorType& typeOf(const Node& n, size_t i) { return n.operand(i)->type(); }

/// "w (%conv1.w: f32[20,1,3,3])": the operand by its slot's name in the spec.
inline std::string describeOperand(const Node& n, size_t i) {
  const auto& specs = n.info().operands;
  const size_t slot = operandSlot(n, i);
  absl::string_view role = slot < specs.size() ? absl::string_view(specs[slot].name)
                                               : absl::string_view(specs.back().name);
  return absl::StrCat(role, " (%", n.operand(i)->name(), ": ", toString(typeOf(n, i)), ")");
}

inline absl::Status fail(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

inline absl::Status expectRank(const Node& n, size_t i, int64_t rank, absl::string_view layout) {
  if (typeOf(n, i).rank() == rank) return absl::OkStatus();
  return fail(absl::StrCat(describeOperand(n, i), " must have rank ", rank, " (", layout, ")"));
}

/// A weight beside activations of dtype `act`: of that dtype, or f32 master weights under
/// bf16 activations (mixed precision; the kernel converts them as it reads them).
inline absl::Status expectWeightDType(const Node& n, size_t i, DType act) {
  DType t = typeOf(n, i).dtype;
  if (t == act || t == DType::kF32) return absl::OkStatus();
  if (act == DType::kF32)
    return fail(absl::StrCat(describeOperand(n, i), " must be f32 like the activations (a ",
                             dtypeName(t), " weight needs ", dtypeName(t), " activations)"));
  return fail(absl::StrCat(describeOperand(n, i), " must be ", dtypeName(act),
                           " or f32 (master weights) beside ", dtypeName(act), " activations"));
}

/// The [C] type of per-channel parameters and statistics: f32 whatever the activations'
/// dtype (batch norm keeps its parameters, statistics and running averages in f32).
inline TensorType channelType(int64_t channels) { return TensorType{DType::kF32, {channels}}; }

inline absl::Status expectType(const Node& n, size_t i, const TensorType& want,
                               absl::string_view why) {
  if (typeOf(n, i) == want) return absl::OkStatus();
  return fail(absl::StrCat(describeOperand(n, i), " must be ", toString(want), " (", why, ")"));
}

inline absl::Status expectSameType(const Node& n, size_t i, size_t j) {
  if (typeOf(n, i) == typeOf(n, j)) return absl::OkStatus();
  return fail(absl::StrCat(describeOperand(n, i), " and ", describeOperand(n, j),
                           " must have the same type"));
}

inline absl::Status expectSameDType(const Node& n, size_t i, size_t j) {
  if (typeOf(n, i).dtype == typeOf(n, j).dtype) return absl::OkStatus();
  return fail(absl::StrCat(describeOperand(n, i), " and ", describeOperand(n, j),
                           " must have the same dtype"));
}

/// Output extent of a sliding window; an error when the window does not fit. With
/// `ceil_mode` (pooling's) the extent rounds up, dropping a last window that would start in
/// the trailing padding (PyTorch's rule).
inline absl::StatusOr<int64_t> windowExtent(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                            absl::string_view axis, bool ceil_mode = false) {
  if (kernel < 1 || stride < 1 || pad < 0)
    return fail(absl::StrCat("kernel ", kernel, ", stride ", stride, " and padding ", pad,
                             " must be >= 1, >= 1 and >= 0"));
  int64_t span = 0;  // in + 2 * pad - kernel, which absurd attributes could overflow
  if (__builtin_mul_overflow(pad, 2, &span) || __builtin_add_overflow(span, in, &span))
    return fail(absl::StrCat("padding ", pad, " is too large for the ", axis, " extent ", in));
  span -= kernel;
  if (span < 0)
    return fail(absl::StrCat("a ", kernel, "-wide window does not fit the ", axis, " extent ", in,
                             " with padding ", pad));
  if (!ceil_mode) return span / stride + 1;
  const int64_t out = (span + stride - 1) / stride + 1;
  return (out - 1) * stride >= in + pad ? out - 1 : out;
}

/// The variable operand `i` reads; an error unless it comes straight from a param node.
inline absl::StatusOr<std::string> varReadBy(const Node& n, size_t i) {
  const Node* def = n.operand(i)->def();
  if (def != nullptr && ParamView::is(*def)) return ParamView(*def).var();
  return fail(
      absl::StrCat(describeOperand(n, i), " must be read straight from a variable (a param node)"));
}

/// Operand `i` is the i32[1] the runtime feeds before every update: read straight from
/// @step (role fed). Any other value would leave every step drawing the same random masks
/// without a word (dropout, attention's dropout).
inline absl::Status expectStepOperand(const Node& n, size_t i) {
  if (absl::Status s = expectType(n, i, TensorType{DType::kI32, {1}}, "the update's index, @step");
      !s.ok())
    return s;
  absl::StatusOr<std::string> var = varReadBy(n, i);
  if (!var.ok()) return var.status();
  const Var* decl = n.graph() != nullptr && n.graph()->module() != nullptr
                        ? n.graph()->module()->findVar(*var)
                        : nullptr;
  if (*var != kStepVar || (decl != nullptr && decl->role != VarRole::kFed))
    return fail(absl::StrCat(describeOperand(n, i), " reads @", *var, "; it must read @", kStepVar,
                             " (role fed), which the runtime writes before every update"));
  return absl::OkStatus();
}

}  // namespace tandem::ir::rules
