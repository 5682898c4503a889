#include "ir/printer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/plan.h"

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

// What a node's plan clause refers to: the graph's plan and its nodes by id.
struct PlanContext {
  const GraphPlan* plan = nullptr;
  std::vector<const Node*> by_id;
};

std::string partsText(const GraphPlan& p) {
  std::vector<absl::string_view> parts;
  for (PlanPart part : kPlanParts)
    if (p.has(part)) parts.push_back(planPartName(part));
  return absl::StrJoin(parts, ", ");
}

// The plan lines at the top of a planned graph's body.
void appendGraphPlan(std::string* out, const Module& m, const GraphPlan& p) {
  absl::StrAppendFormat(out, "  plan {fingerprint=\"%016x\", parts=[%s]", p.fingerprint,
                        partsText(p));
  if (p.has(PlanPart::kMemory)) absl::StrAppend(out, ", alignment=", p.alignment);
  out->append("}\n");
  for (size_t d = 0; d < p.arenas.size(); ++d)
    absl::StrAppend(out, "  arena ",
                    d < m.devices().size() ? toString(m.devices()[d]) : absl::StrCat("?", d),
                    " {bytes=", p.arenas[d].bytes, ", peak=", p.arenas[d].live_peak_bytes,
                    ", unshared=", p.arenas[d].unshared_bytes, "}\n");
}

// " plan{stream=compute, wait=[%a.0], layout=[nChw16c], algo=gemm, offset=[0],
// workspace=[4096, 512]}": what the plan says of one node (a layout list only where a
// result is not plain).
void appendNodePlan(std::string* out, const Node& n, const PlanContext& ctx) {
  if (n.id() >= ctx.plan->nodes.size()) return;
  const NodePlan& p = ctx.plan->of(n);
  const bool layouts = std::any_of(p.layouts.begin(), p.layouts.end(), [](ActivationLayout l) {
    return l != ActivationLayout::kPlain;
  });
  if (!p.stream && p.waits.empty() && !layouts && p.algorithm.empty() && p.offsets.empty() &&
      !p.workspace)
    return;
  const char* sep = "";
  out->append(" plan{");
  if (p.stream) {
    absl::StrAppend(out, "stream=", streamName(*p.stream));
    sep = ", ";
  }
  if (!p.waits.empty()) {
    absl::StrAppend(out, sep, "wait=[");
    for (size_t i = 0; i < p.waits.size(); ++i) {
      const ValueRef& r = p.waits[i];
      const Node* def = r.node < ctx.by_id.size() ? ctx.by_id[r.node] : nullptr;
      // A dangling reference (a plan built wrongly in memory) prints as one, and the
      // parser refuses it.
      absl::StrAppend(
          out, i ? ", %" : "%",
          def != nullptr && r.result < def->numResults() ? def->result(r.result)->name() : "?");
    }
    out->push_back(']');
    sep = ", ";
  }
  if (layouts) {
    absl::StrAppend(out, sep, "layout=[");
    for (size_t r = 0; r < n.numResults(); ++r)
      absl::StrAppend(out, r ? ", " : "", layoutName(p.layout(r)));
    out->push_back(']');
    sep = ", ";
  }
  if (!p.algorithm.empty()) {
    absl::StrAppend(out, sep, "algo=", p.algorithm);
    sep = ", ";
  }
  if (!p.offsets.empty()) {
    absl::StrAppend(out, sep, "offset=[", absl::StrJoin(p.offsets, ", "), "]");
    sep = ", ";
  }
  if (p.workspace)
    absl::StrAppend(out, sep, "workspace=[", p.workspace->offset, ", ", p.workspace->bytes, "]");
  out->push_back('}');
}

void appendAttributes(std::string* out, const Node& n) {
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
}

void appendNode(std::string* out, const Node& n, const PrintOptions& opts,
                const PlanContext* plan = nullptr) {
  for (size_t i = 0; i < n.numResults(); ++i)
    absl::StrAppend(out, i ? ", %" : "%", n.result(i)->name());
  if (n.numResults() > 0) out->append(" = ");
  absl::StrAppend(out, n.opName(), "(");
  appendValueList(out, n.operands());
  out->push_back(')');
  appendAttributes(out, n);
  if (n.device()) absl::StrAppend(out, " @", toString(*n.device()));
  for (size_t i = 0; i < n.numResults(); ++i)
    absl::StrAppend(out, i ? ", " : " : ", toString(n.result(i)->type()));
  if (plan != nullptr) appendNodePlan(out, n, *plan);
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
  PlanContext ctx{.plan = g.plan()};
  if (ctx.plan != nullptr) {
    appendGraphPlan(out, *g.module(), *ctx.plan);
    ctx.by_id.assign(g.idBound(), nullptr);
    for (const auto& n : g.nodes()) ctx.by_id[n->id()] = n.get();
  }
  for (const auto& n : g.nodes()) {
    if (n->op() == Op::kInput) continue;
    out->append("  ");
    appendNode(out, *n, opts, ctx.plan != nullptr ? &ctx : nullptr);
    out->push_back('\n');
  }
  out->append("  return");
  if (!g.outputs().empty()) out->push_back(' ');
  appendValueList(out, g.outputs());
  out->append("\n}\n");
}

}  // namespace

std::string printAttributes(const Node& n) {
  std::string out;
  appendAttributes(&out, n);
  return out;
}

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
  for (const Var& v : m.vars()) {
    absl::StrAppend(&out, "var @", v.name, " : ", toString(v.type), " {role=", varRoleName(v.role),
                    ", init=", toString(v.init));
    if (v.sharded() || !v.packs.empty())
      absl::StrAppend(&out, ", shards=[", absl::StrJoin(v.shards, ", "), "]");
    if (v.shard_groups != 1) absl::StrAppend(&out, ", shard_groups=", v.shard_groups);
    if (!v.packs.empty()) {
      out.append(", packs=[");
      for (size_t i = 0; i < v.packs.size(); ++i)
        absl::StrAppend(&out, i ? ", @" : "@", v.packs[i].var, " : ", toString(v.packs[i].type));
      out.append("]");
    }
    out.append("}\n");
  }
  for (const auto& g : m.graphs()) {
    out.push_back('\n');
    appendGraph(&out, *g, opts);
  }
  out.append("}\n");
  return out;
}

}  // namespace tandem::ir
