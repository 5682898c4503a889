#include "ir/printer.h"

#include "absl/strings/str_cat.h"

namespace tandem::ir {
namespace {

void appendQuoted(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    // The lexer ends a string at an unescaped quote or line break; a backslash keeps
    // either (and itself) literal.
    if (c == '"' || c == '\\' || c == '\n') out->push_back('\\');
    out->push_back(c);
  }
  out->push_back('"');
}

void appendValueList(std::string* out, const std::vector<Value*>& vs) {
  for (size_t i = 0; i < vs.size(); ++i) absl::StrAppend(out, i ? ", %" : "%", vs[i]->name());
}

void appendNode(std::string* out, const Node& n, const PrintOptions& opts) {
  for (size_t i = 0; i < n.numResults(); ++i)
    absl::StrAppend(out, i ? ", %" : "%", n.result(i)->name());
  if (n.numResults() > 0) out->append(" = ");
  absl::StrAppend(out, n.opName(), "(");
  appendValueList(out, n.operands());
  out->push_back(')');
  // Optional attributes at their default are left out, so the text reads as before they
  // existed and parses back to the same node.
  const auto& specs = n.info().attrs;
  bool first = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].default_value && *specs[i].default_value == n.attrs()[i]) continue;
    absl::StrAppend(out, first ? " {" : ", ", specs[i].name, "=", toString(n.attrs()[i]));
    first = false;
  }
  if (!first) out->push_back('}');
  if (n.device()) absl::StrAppend(out, " @", toString(*n.device()));
  for (size_t i = 0; i < n.numResults(); ++i)
    absl::StrAppend(out, i ? ", " : " : ", toString(n.result(i)->type()));
  if (opts.locations && (!n.scope().empty() || !n.location().empty())) {
    out->append(" loc(");
    appendQuoted(out, n.scope());
    if (!n.location().empty()) {
      out->append(", ");
      appendQuoted(out, n.location());
    }
    out->push_back(')');
  }
}

void appendGraph(std::string* out, const Graph& g, const PrintOptions& opts) {
  absl::StrAppend(out, "graph @", g.name(), "(");
  bool first = true;
  for (const auto& n : g.nodes()) {
    if (n->op() != Op::kInput) continue;
    absl::StrAppend(out, first ? "%" : ", %", n->result()->name(), ": ",
                    toString(n->result()->type()));
    if (n->device()) absl::StrAppend(out, " @", toString(*n->device()));
    first = false;
  }
  out->append(") {\n");
  for (const auto& n : g.nodes()) {
    if (n->op() == Op::kInput) continue;
    out->append("  ");
    appendNode(out, *n, opts);
    out->push_back('\n');
  }
  out->append("  return");
  if (!g.outputs().empty()) out->push_back(' ');
  appendValueList(out, g.outputs());
  out->append("\n}\n");
}

}  // namespace

std::string printNode(const Node& n, const PrintOptions& opts) {
  std::string out;
  appendNode(&out, n, opts);
  return out;
}

std::string printGraph(const Graph& g, const PrintOptions& opts) {
  std::string out;
  appendGraph(&out, g, opts);
  return out;
}

std::string printModule(const Module& m, const PrintOptions& opts) {
  std::string out = absl::StrCat("module @", m.name());
  if (m.isReplicated()) absl::StrAppend(&out, " devices=", toString(m.devices()));
  out.append(" {\n");
  for (const Var& v : m.vars())
    absl::StrAppend(&out, "var @", v.name, " : ", toString(v.type), " {role=", varRoleName(v.role),
                    ", init=", toString(v.init), "}\n");
  for (const auto& g : m.graphs()) {
    out.push_back('\n');
    appendGraph(&out, *g, opts);
  }
  out.append("}\n");
  return out;
}

}  // namespace tandem::ir
