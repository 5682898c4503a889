// Ops that bring values into a graph or write them out to persistent state.

#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

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

/// param and initialize: the type of the variable they read.
template <typename View>
absl::StatusOr<Types> inferVarRead(const Node& n) {
  auto var = lookupVar(n, View(n).var());
  if (!var.ok()) return var.status();
  return Types{(*var)->type};
}

absl::StatusOr<Types> inferAssign(const Node& n) {
  auto var = lookupVar(n, AssignView(n).var());
  if (!var.ok()) return var.status();
  if (absl::Status s = expectType(n, 0, (*var)->type, absl::StrCat("the type of @", (*var)->name));
      !s.ok())
    return s;
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
