#include "ir/dot.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"

namespace tandem::ir {

std::string dotEscape(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}});
}

std::string dotNodeLabel(const Node& n) {
  std::string l(n.opName());
  if (const std::string* var = variableOf(n)) absl::StrAppend(&l, " @", *var);
  if (auto c = CollectiveView::of(n); c && c->bucket())
    absl::StrAppend(&l, " bucket ", *c->bucket());
  if (n.numResults() > 0) {
    absl::StrAppend(&l, "\\n%", dotEscape(n.result()->name()));
    if (n.numResults() > 1) absl::StrAppend(&l, " (+", n.numResults() - 1, ")");
    absl::StrAppend(&l, "\\n", toString(n.result()->type()));
  }
  return l;
}

std::string dotNodeStyle(const Node& n) {
  if (n.info().has(kCollective))
    return "shape=box, style=\"filled,bold\", fillcolor=orange, penwidth=2";
  if (n.op() == Op::kInput) return "shape=invhouse, style=filled, fillcolor=lightblue";
  if (n.op() == Op::kParam) return "shape=note, fontsize=9";
  if (n.info().has(kStateful)) return "shape=box, style=filled, fillcolor=palegreen";
  if (n.info().has(kBackward)) return "shape=box, style=filled, fillcolor=mistyrose";
  return "shape=box";
}

std::string exportDot(const Graph& g) {
  std::string out = absl::StrCat("digraph \"", dotEscape(g.name()), "\" {\n",
                                 "  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n");
  absl::flat_hash_map<const Node*, size_t> id;
  // Group by device in first-seen order so clusters come out in device order (a sorted
  // map would put cpu:10 before cpu:2).
  std::vector<std::pair<std::string, std::vector<const Node*>>> by_device;
  absl::flat_hash_map<std::string, size_t> cluster_of;
  std::vector<const Node*> outside;
  for (const auto& n : g.nodes()) {
    id[n.get()] = id.size();
    if (n->device() && !n->info().has(kCollective)) {
      std::string device = toString(*n->device());
      auto [it, added] = cluster_of.emplace(device, by_device.size());
      if (added) by_device.emplace_back(std::move(device), std::vector<const Node*>());
      by_device[it->second].second.push_back(n.get());
    } else {
      outside.push_back(n.get());
    }
  }
  auto emit = [&](const Node* n, absl::string_view indent) {
    absl::StrAppend(&out, indent, "n", id[n], " [label=\"", dotNodeLabel(*n), "\", ",
                    dotNodeStyle(*n), "];\n");
  };
  size_t cluster = 0;
  for (const auto& [device, nodes] : by_device) {
    absl::StrAppend(&out, "  subgraph cluster_", cluster++, " {\n    label=\"", device,
                    "\";\n    style=rounded;\n    color=gray40;\n");
    for (const Node* n : nodes) emit(n, "    ");
    out.append("  }\n");
  }
  for (const Node* n : outside) emit(n, "  ");
  for (const auto& n : g.nodes())
    for (const Value* v : n->operands())
      if (v->def() != nullptr)
        absl::StrAppend(&out, "  n", id[v->def()], " -> n", id[n.get()], ";\n");
  if (!g.outputs().empty()) {
    out.append("  out [label=\"return\", shape=doublecircle];\n");
    for (const Value* v : g.outputs()) absl::StrAppend(&out, "  n", id[v->def()], " -> out;\n");
  }
  out.append("}\n");
  return out;
}

}  // namespace tandem::ir
