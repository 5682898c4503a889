// sgd_update: the in-place optimizer step.

#include "ir/ops/rule_util.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::StatusOr<Types> inferSgdUpdate(const Node& n) {  // w, g, m?
  double lr = n.floatAttr("lr"), momentum = n.floatAttr("momentum"),
         wd = n.floatAttr("weight_decay");
  if (!(lr >= 0)) return fail("lr must be >= 0");
  if (!(momentum >= 0 && momentum < 1)) return fail("momentum must be in [0, 1)");
  if (!(wd >= 0)) return fail("weight_decay must be >= 0");
  bool has_buffer = n.numOperands() > 2;
  if (has_buffer != (momentum > 0))
    return fail(momentum > 0 ? "momentum > 0 needs a momentum buffer operand m"
                             : "a momentum buffer m is given but momentum is 0");
  if (absl::Status s = expectF32(n, 0, "the update runs on f32 master weights"); !s.ok()) return s;
  for (size_t i = 0; i < n.numOperands(); ++i) {
    // The gradient may arrive in bf16 (reduced in bf16 to halve the bytes on the wire);
    // the update converts it as it reads it.
    if (i == 1 && typeOf(n, 1) == TensorType{DType::kBF16, typeOf(n, 0).shape}) continue;
    if (i > 0)
      if (absl::Status s = expectSameType(n, 0, i); !s.ok()) return s;
    if (i == 1) continue;
    auto var = varReadBy(n, i);
    if (!var.ok()) return var.status();
    const Var* decl = n.graph()->module()->findVar(*var);
    VarRole want = i == 0 ? VarRole::kParam : VarRole::kOptimizer;
    if (decl != nullptr && decl->role != want)
      return fail(absl::StrCat(describeOperand(n, i), " reads @", *var, " whose role is ",
                               varRoleName(decl->role), ", expected ", varRoleName(want)));
  }
  return Types{};
}

std::vector<std::string> writesSgdUpdate(const Node& n) {
  std::vector<std::string> out;
  for (size_t i : {size_t{0}, size_t{2}})
    if (i < n.numOperands())
      if (auto var = varReadBy(n, i); var.ok()) out.push_back(*var);
  return out;
}

}  // namespace

extern const OpRules kSgdUpdateRules{.infer = inferSgdUpdate, .writes = writesSgdUpdate};

}  // namespace tandem::ir
