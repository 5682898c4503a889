#include "ir/dot_views.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/dot.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"

namespace tandem::ir {
namespace {

using Phase = StepPhase;

const char* phaseStyle(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "style=\"rounded,filled\", fillcolor=white";
    case Phase::kBackward:
      return "style=\"rounded,filled\", fillcolor=mistyrose";
    case Phase::kUpdate:
      return "style=\"rounded,filled\", fillcolor=palegreen";
  }
  return "";
}

/// The layer path of a node's own scope: fused nodes list their layers joined by " + "
/// (the first one stands for them), recomputed ones add " (recomputed)".
absl::string_view ownPath(const Node& n) {
  absl::string_view s = n.scope();
  s = s.substr(0, s.find(" + "));
  return s.substr(0, s.find(" ("));
}

/// The first `depth` dotted components of `path`.
absl::string_view prefix(absl::string_view path, int depth) {
  size_t end = 0;
  for (int i = 0; i < depth; ++i) {
    end = path.find('.', i == 0 ? 0 : end + 1);
    if (end == absl::string_view::npos) return path;
  }
  return path.substr(0, end);
}

bool inScope(absl::string_view path, absl::string_view scope) {
  return path == scope ||
         (absl::StartsWith(path, scope) && path.size() > scope.size() && path[scope.size()] == '.');
}

std::string humanBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  if (bytes < 1024 * 1024) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  if (bytes < int64_t{1} << 30) return absl::StrFormat("%.2f MiB", bytes / 1048576.0);
  return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
}

/// "cpu:0, cpu:1" for a few devices, "cpu:0 .. cpu:7 (8 devices)" for more.
std::string deviceList(const std::vector<Device>& ds) {
  if (ds.size() <= 4) {
    std::vector<std::string> names;
    for (const Device& d : ds) names.push_back(toString(d));
    return absl::StrJoin(names, ", ");
  }
  return absl::StrCat(toString(ds.front()), " .. ", toString(ds.back()), " (", ds.size(),
                      " devices)");
}

std::string collectiveLabel(const Node& n) {
  std::string l(n.opName());
  const CollectiveView c(n);
  if (c.bucket()) absl::StrAppend(&l, " bucket ", *c.bucket());
  const std::vector<Device>& ds = c.devices();
  int64_t bytes = 0;
  for (size_t i = 0; i < n.numResults(); ++i) bytes += n.result(i)->type().bytes();
  const size_t per_device = ds.empty() ? n.numResults() : n.numResults() / ds.size();
  absl::StrAppend(&l, "\\n", per_device, per_device == 1 ? " tensor, " : " tensors, ",
                  humanBytes(ds.empty() ? bytes : bytes / static_cast<int64_t>(ds.size())),
                  " per device\\n", deviceList(ds));
  if (c.numGroups() != 1) absl::StrAppend(&l, " in ", c.numGroups(), " groups");
  return l;
}

/// An edge's label: each distinct type with its count, or a total when there are many.
std::string edgeLabel(const std::vector<const Value*>& values) {
  std::vector<std::pair<std::string, int>> types;
  int64_t bytes = 0;
  for (const Value* v : values) {
    bytes += v->type().bytes();
    std::string t = toString(v->type());
    auto it = std::find_if(types.begin(), types.end(), [&](const auto& p) { return p.first == t; });
    if (it == types.end()) {
      types.emplace_back(std::move(t), 1);
    } else {
      ++it->second;
    }
  }
  if (types.size() > 3) return absl::StrCat(values.size(), " tensors\\n", humanBytes(bytes));
  std::vector<std::string> lines;
  for (const auto& [t, count] : types)
    lines.push_back(count == 1 ? t : absl::StrCat(t, " x", count));
  return absl::StrJoin(lines, "\\n");
}

struct Box {
  std::string scope;
  Phase phase;
  int nodes = 0;
};

struct Cluster {
  std::string device;
  std::vector<size_t> boxes;          // indices into the box list
  std::vector<const Node*> expanded;  // nodes of the --focus scope
};

}  // namespace

absl::string_view phaseName(StepPhase p) {
  switch (p) {
    case StepPhase::kForward:
      return "forward";
    case StepPhase::kBackward:
      return "backward";
    case StepPhase::kUpdate:
      return "update";
  }
  return "";
}

std::vector<StepPhase> stepPhases(const Graph& g) {
  // A node is backward when autodiff made it or it reads something backward made (the
  // casts and collectives of gradients); an optimizer update is the update.
  std::vector<StepPhase> phase(g.idBound(), StepPhase::kForward);
  for (const auto& n : g.nodes()) {
    StepPhase p = n->info().has(kBackward) ? StepPhase::kBackward : StepPhase::kForward;
    for (const Value* v : n->operands())
      if (v->def() != nullptr && phase[v->def()->id()] != StepPhase::kForward)
        p = StepPhase::kBackward;
    if (UpdateView::is(*n)) p = StepPhase::kUpdate;
    phase[n->id()] = p;
  }
  return phase;
}

/// The layer path of every node, by id. Nodes the builder made outside any layer take it
/// from what they touch: params, initializers and assigns from their variable ("conv1.w"
/// is in conv1), others (the updates) from their first operand with a path.
/// sgd_update_group keeps its own scope, the layers its members share.
std::vector<std::string> layerPaths(const Graph& g) {
  std::vector<std::string> paths(g.idBound());
  for (const auto& n : g.nodes()) {
    std::string& path = paths[n->id()];
    path = std::string(ownPath(*n));
    // A group of updates across layers belongs to none of them (its scope is what its
    // members share, group-updates).
    if (!path.empty() || (UpdateView::is(*n) && UpdateView::of(*n)->grouped())) continue;
    if (const std::string* name = variableOf(*n)) {
      absl::string_view var = *name;
      path = std::string(var.substr(0, std::min(var.rfind('.'), var.size())));
      if (path == var) path.clear();  // a variable outside any layer
      continue;
    }
    for (const Value* v : n->operands())
      if (v->def() != nullptr && !paths[v->def()->id()].empty()) {
        path = paths[v->def()->id()];
        break;
      }
  }
  return paths;
}

absl::StatusOr<std::string> exportDotView(const Graph& g, const DotView& view) {
  if (view.collapse < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("DOT view: collapse depth ", view.collapse, " is negative"));
  if (view.collapse == 0) {
    if (!view.focus.empty())
      return absl::InvalidArgumentError(
          "DOT view: a focus scope needs a collapsed view (every node is drawn already)");
    return exportDot(g);
  }
  const std::vector<std::string> paths = layerPaths(g);
  if (!view.focus.empty()) {
    bool found = false;
    std::vector<std::string> known;  // scopes at the collapse depth, in graph order
    for (const auto& n : g.nodes()) {
      absl::string_view path = paths[n->id()];
      if (path.empty()) continue;
      found = found || inScope(path, view.focus);
      std::string top(prefix(path, view.collapse));
      if (std::find(known.begin(), known.end(), top) == known.end()) known.push_back(top);
    }
    if (!found) {
      const size_t shown = std::min<size_t>(known.size(), 8);
      return absl::NotFoundError(absl::StrCat(
          "graph @", g.name(), " has no scope '", view.focus, "' (scopes at depth ", view.collapse,
          ": ", absl::StrJoin(known.begin(), known.begin() + shown, ", "),
          known.size() > shown ? absl::StrCat(", ... ", known.size(), " in all") : "", ")"));
    }
  }

  const std::vector<Phase> phase = stepPhases(g);

  // Where each node is drawn: "bK" (a box) or "nK" (a node of its own, K its position in
  // the graph as exportDot numbers it: ids keep gaps after passes, positions do not).
  std::vector<std::string> endpoint(g.idBound());
  std::vector<size_t> position(g.idBound());
  for (size_t i = 0; i < g.numNodes(); ++i) position[g.nodes()[i]->id()] = i;
  std::vector<Box> boxes;
  std::vector<Cluster> clusters;
  std::vector<const Node*> outside;
  absl::flat_hash_map<std::string, size_t> cluster_of;
  absl::flat_hash_map<std::tuple<size_t, std::string, Phase>, size_t> box_of;
  for (const auto& n : g.nodes()) {
    const uint32_t id = n->id();
    if (!n->device() || n->info().has(kCollective)) {
      endpoint[id] = absl::StrCat("n", position[id]);
      outside.push_back(n.get());
      continue;
    }
    // Clusters in first-seen order: device order (a sorted map puts cpu:10 before cpu:2).
    std::string device = toString(*n->device());
    auto [c, added] = cluster_of.emplace(device, clusters.size());
    if (added) clusters.push_back(Cluster{std::move(device), {}, {}});
    Cluster& cluster = clusters[c->second];
    absl::string_view path = paths[n->id()];
    if (!view.focus.empty() && inScope(path, view.focus)) {
      endpoint[id] = absl::StrCat("n", position[id]);
      cluster.expanded.push_back(n.get());
      continue;
    }
    std::string scope(path.empty() ? "(no scope)" : prefix(path, view.collapse));
    auto [b, new_box] = box_of.emplace(std::make_tuple(c->second, scope, phase[id]), boxes.size());
    if (new_box) {
      boxes.push_back(Box{std::move(scope), phase[id]});
      cluster.boxes.push_back(b->second);
    }
    ++boxes[b->second].nodes;
    endpoint[id] = absl::StrCat("b", b->second);
  }

  std::string out =
      absl::StrCat("digraph \"", dotEscape(g.name()), "\" {\n",
                   "  rankdir=TB;\n  newrank=true;\n  node [fontname=\"monospace\", fontsize=10];\n"
                   "  edge [fontname=\"monospace\", fontsize=8];\n");
  for (size_t c = 0; c < clusters.size(); ++c) {
    const Cluster& cluster = clusters[c];
    absl::StrAppend(&out, "  subgraph cluster_", c, " {\n    label=\"", cluster.device,
                    "\";\n    style=rounded;\n    color=gray40;\n");
    for (size_t b : cluster.boxes)
      absl::StrAppend(&out, "    b", b, " [label=\"", dotEscape(boxes[b].scope), "\\n",
                      phaseName(boxes[b].phase), ", ", boxes[b].nodes,
                      boxes[b].nodes == 1 ? " node" : " nodes", "\", shape=box, ",
                      phaseStyle(boxes[b].phase), "];\n");
    if (!cluster.expanded.empty()) {
      absl::StrAppend(&out, "    subgraph cluster_", c, "_focus {\n      label=\"",
                      dotEscape(view.focus), "\";\n      style=dashed;\n");
      for (const Node* n : cluster.expanded)
        absl::StrAppend(&out, "      ", endpoint[n->id()], " [label=\"", dotNodeLabel(*n), "\", ",
                        dotNodeStyle(*n), "];\n");
      out.append("    }\n");
    }
    out.append("  }\n");
  }
  for (const Node* n : outside) {
    const std::string label = n->info().has(kCollective) ? collectiveLabel(*n) : dotNodeLabel(*n);
    absl::StrAppend(&out, "  ", endpoint[n->id()], " [label=\"", label, "\", ", dotNodeStyle(*n),
                    "];\n");
  }

  // Edges between different endpoints, one per pair, each value once.
  std::vector<std::pair<std::string, std::string>> order;
  absl::flat_hash_map<std::pair<std::string, std::string>, std::vector<const Value*>> carried;
  absl::flat_hash_set<std::pair<const Value*, std::string>> seen;  // (value, destination)
  auto connect = [&](const Value* v, const std::string& to) {
    const std::string& from = endpoint[v->def()->id()];
    if (from == to || !seen.emplace(v, to).second) return;
    auto [it, added] = carried.try_emplace(std::make_pair(from, to));
    if (added) order.emplace_back(from, to);
    it->second.push_back(v);
  };
  for (const auto& n : g.nodes())
    for (const Value* v : n->operands())
      if (v->def() != nullptr) connect(v, endpoint[n->id()]);
  if (!g.outputs().empty()) {
    out.append("  out [label=\"return\", shape=doublecircle];\n");
    for (const Value* v : g.outputs())
      if (v->def() != nullptr) connect(v, "out");
  }
  for (const auto& key : order)
    // xlabel, not label: dot ranks a label as a node of its own, which made a ResNet-50
    // with sync batch norm on 8 devices take 12 s instead of 1 s (docs/PERF.md).
    absl::StrAppend(&out, "  ", key.first, " -> ", key.second, " [xlabel=\"",
                    edgeLabel(carried[key]), "\"];\n");
  out.append("}\n");
  return out;
}

}  // namespace tandem::ir
