#include "tools/tandem/module_file.h"

#include "absl/strings/str_cat.h"
#include "ir/parser.h"
#include "ir/plan.h"
#include "ir/verifier.h"

namespace tandem::tools {
namespace {

std::string inputTypes(const ir::Graph& g) {
  std::string out;
  for (const ir::Node* in : g.inputs())
    absl::StrAppend(&out, out.empty() ? "" : ", ", ir::toString(in->result()->type()));
  return absl::StrCat("(", out, ")");
}

// What differs between the file's module and the compiled one, or "".
std::string difference(const ir::Module& file, const ir::Module& compiled) {
  if (file.name() != compiled.name())
    return absl::StrCat("it is module @", file.name(), ", the flags train @", compiled.name());
  if (file.devices() != compiled.devices())
    return absl::StrCat("it runs on ", ir::toString(file.devices()), ", the flags give ",
                        ir::toString(compiled.devices()));
  for (const ir::Var& v : compiled.vars()) {
    const ir::Var* w = file.findVar(v.name);
    if (w == nullptr) return absl::StrCat("it has no variable @", v.name);
    if (w->type != v.type || w->role != v.role)
      return absl::StrCat("its variable @", v.name, " is ", ir::toString(w->type), " ",
                          ir::varRoleName(w->role), ", the flags give ", ir::toString(v.type), " ",
                          ir::varRoleName(v.role));
  }
  if (file.vars().size() != compiled.vars().size())
    return absl::StrCat("it has ", file.vars().size(), " variables, the flags give ",
                        compiled.vars().size());
  for (const auto& g : compiled.graphs()) {
    const ir::Graph* h = file.graph(g->name());
    if (h == nullptr) return absl::StrCat("it has no graph @", g->name());
    if (inputTypes(*h) != inputTypes(*g))
      return absl::StrCat("graph @", g->name(), " takes ", inputTypes(*h), ", the flags give ",
                          inputTypes(*g), " (--batch)");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Module>> readModuleToTrain(const std::string& path,
                                                              const ir::Module& compiled) {
  const std::string what = absl::StrCat("--module ", path, ": ");
  auto m = ir::parseModuleFile(path);
  if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat(what, m.status().message()));
  if (absl::Status s = ir::verifyModule(**m); !s.ok())
    return absl::Status(s.code(), absl::StrCat(what, "verifier: ", s.message()));
  if (std::string diff = difference(**m, compiled); !diff.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, diff));
  for (const auto& g : (*m)->graphs())
    if (absl::Status s = ir::checkPlanFor(*g, ir::PlanPart::kMemory, "plan-memory"); !s.ok())
      return absl::Status(
          s.code(), absl::StrCat(what, s.message(), " (dump the module after the whole pipeline)"));
  return std::move(*m);
}

}  // namespace tandem::tools
