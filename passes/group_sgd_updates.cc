#include "passes/group_sgd_updates.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "ir/status_macros.h"
#include "ir/updates.h"
#include "passes/insertions.h"

namespace tandem::passes {
namespace {

using ir::Node;
using ir::Op;

/// What updates must share to run in one launch: device, the collective their gradient
/// comes from (null: a local gradient), hyperparameters and gradient dtype.
using GroupKey = std::tuple<std::string, const Node*, double, double, double, ir::DType>;

GroupKey keyOf(const Node& u) {
  const Node* def = u.operand(1)->def();
  const bool collective = def != nullptr && def->info().has(ir::kCollective);
  return {u.device() ? ir::toString(*u.device()) : std::string(),
          collective ? def : nullptr,
          u.floatAttr("lr"),
          u.floatAttr("momentum"),
          u.floatAttr("weight_decay"),
          u.operand(1)->type().dtype};
}

/// The longest dotted prefix of every member's scope ("stage1.block0" and "stage1.block1"
/// share "stage1"), so that dumps draw the group with what it updates.
std::string commonScope(const std::vector<Node*>& members) {
  std::string common = members.front()->scope();
  for (const Node* u : members) {
    const std::string& s = u->scope();
    size_t same = 0;
    while (same < common.size() && same < s.size() && common[same] == s[same]) ++same;
    const bool whole = same == common.size() && (same == s.size() || s[same] == '.');
    if (whole) continue;
    const size_t dot = common.rfind('.', same);
    common.resize(dot == std::string::npos || same == 0 ? 0 : dot);
  }
  return common;
}

/// The sgd_update_group of `members` (in graph order).
ir::NodeSpec groupSpec(const std::vector<Node*>& members) {
  const Node& first = *members.front();
  const bool momentum = first.numOperands() > 2;
  ir::NodeSpec spec{
      .op = Op::kSgdUpdateGroup, .device = first.device(), .scope = commonScope(members)};
  for (size_t operand : {0, 1, 2}) {
    if (operand == 2 && !momentum) break;
    for (const Node* u : members) spec.operands.push_back(u->operand(operand));
  }
  for (absl::string_view attr : {"lr", "momentum", "weight_decay"})
    spec.attrs.emplace_back(std::string(attr), first.attr(attr));
  return spec;
}

absl::StatusOr<bool> groupGraph(ir::Graph& g) {
  // Members of each group in graph order; groups in the order of their first member, so
  // the output does not depend on pointer values.
  std::vector<std::vector<Node*>> groups;
  std::map<GroupKey, size_t> group_of_key;
  for (const auto& n : g.nodes()) {
    if (n->op() != Op::kSgdUpdate) continue;
    auto [it, inserted] = group_of_key.emplace(keyOf(*n), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(n.get());
  }
  // Each group of two or more goes right after its last member; the members (no results,
  // so no users) go.
  const ir::Graph::Positions pos = g.positions();
  Insertions insert(g);
  absl::flat_hash_set<const Node*> grouped;
  for (const std::vector<Node*>& members : groups) {
    if (members.size() < 2) continue;
    RETURN_IF_ERROR(insert.add(pos.at(members.back()), groupSpec(members)).status());
    grouped.insert(members.begin(), members.end());
  }
  if (grouped.empty()) return false;
  insert.apply();
  g.eraseIf([&](const Node& n) { return grouped.contains(&n); });
  return true;
}

}  // namespace

absl::StatusOr<bool> GroupSgdUpdates::run(ir::Module& m) {
  bool changed = false;
  for (const auto& g : m.graphs()) {
    ASSIGN_OR_RETURN(bool c, groupGraph(*g));
    changed |= c;
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> GroupSgdUpdates::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new GroupSgdUpdates());
}

}  // namespace tandem::passes
