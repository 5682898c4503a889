// Ops that bring values into a graph or write them out to persistent state.

#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::StatusOr<Types> inferDeclaredSingle(const Node& n) {
  if (n.numResults() != 1) return fail("declares exactly one result type");
  return Types{n.result()->type()};
}

absl::StatusOr<const Var*> lookupVar(const Node& n, const std::string& name) {
  const Var* var = n.graph()->module()->findVar(name);
  if (var == nullptr) return fail(absl::StrCat("refers to unknown variable @", name));
  return var;
}

/// The type of the replica of `var` that `n` reads or writes: the whole variable, or for a
/// sharded one (shard-weight-update's state) the shard of n's device.
absl::StatusOr<TensorType> replicaTypeAt(const Node& n, const Var& var) {
  if (!var.sharded()) return var.type;
  const Module& m = *n.graph()->module();
  const std::optional<size_t> d = n.device() ? m.deviceIndex(*n.device()) : std::nullopt;
  if (!d || *d >= var.shards.size())
    return fail(absl::StrCat("@", var.name, " is sharded over ", var.shards.size(),
                             " devices; a node that reads or writes it must be on one of them"));
  return var.replicaType(*d);
}

/// param and initialize: the type of the variable (replica) they read.
template <typename View>
absl::StatusOr<Types> inferVarRead(const Node& n) {
  ASSIGN_OR_RETURN(const Var* var, lookupVar(n, View(n).var()));
  ASSIGN_OR_RETURN(TensorType type, replicaTypeAt(n, *var));
  return Types{std::move(type)};
}

absl::StatusOr<Types> inferAssign(const Node& n) {
  ASSIGN_OR_RETURN(const Var* var, lookupVar(n, AssignView(n).var()));
  ASSIGN_OR_RETURN(TensorType type, replicaTypeAt(n, *var));
  RETURN_IF_ERROR(expectType(n, 0, type, absl::StrCat("the type of @", var->name)));
  return Types{};
}

std::vector<std::string> writesAssign(const Node& n) { return {AssignView(n).var()}; }

}  // namespace

extern const OpRules kInputRules{.infer = inferDeclaredSingle};
extern const OpRules kParamRules{.infer = inferVarRead<ParamView>};
extern const OpRules kConstantRules{.infer = inferDeclaredSingle};
extern const OpRules kInitializeRules{.infer = inferVarRead<InitializeView>};
extern const OpRules kAssignRules{.infer = inferAssign, .writes = writesAssign};

}  // namespace tandem::ir
