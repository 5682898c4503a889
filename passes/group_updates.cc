#include "passes/group_updates.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"

namespace tandem::passes {
namespace {

using ir::Node;

/// What updates must share to run in one launch: optimizer, device, the collective their
/// gradient comes from (null: a local gradient), gradient dtype, hyperparameters (every
/// attribute, printed) and learning-rate factor (null: none).
using GroupKey =
    std::tuple<ir::Op, std::string, const Node*, ir::DType, std::string, const ir::Value*>;

GroupKey keyOf(const ir::UpdateView& u) {
  const Node& n = u.node();
  const Node* def = u.grad(0)->def();
  const bool collective = def != nullptr && def->info().has(ir::kCollective);
  std::string attrs;
  for (const ir::AttrValue& a : n.attrs()) absl::StrAppend(&attrs, ir::toString(a), ",");
  return {n.op(),           n.device() ? ir::toString(*n.device()) : std::string(),
          collective ? def : nullptr, u.grad(0)->type().dtype,
          std::move(attrs), u.lrScale()};
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

/// The grouped form of `members` (in graph order): their weights, then their gradients,
/// then each present state of all of them, then their shared learning-rate factor; the
/// first member's attributes (all share them).
ir::NodeSpec groupSpec(const std::vector<Node*>& members) {
  const Node& first = *members.front();
  const ir::UpdateView u = *ir::UpdateView::of(first);
  ir::NodeSpec spec{.op = *u.info().grouped,
                    .attr_values = first.attrs(),
                    .device = first.device(),
                    .scope = commonScope(members)};
  std::vector<size_t> streams{u.paramOperand(0), u.gradOperand(0)};
  for (size_t s = 0; s < u.presentStates().size(); ++s) streams.push_back(u.stateOperand(0, s));
  for (size_t operand : streams)
    for (const Node* m : members) spec.operands.push_back(m->operand(operand));
  if (u.lrScale() != nullptr) spec.operands.push_back(u.lrScale());
  return spec;
}

absl::StatusOr<bool> groupGraph(ir::Graph& g) {
  // Members of each group in graph order; groups in the order of their first member, so
  // the output does not depend on pointer values.
  std::vector<std::vector<Node*>> groups;
  std::map<GroupKey, size_t> group_of_key;
  for (const auto& n : g.nodes()) {
    std::optional<ir::UpdateView> u = ir::UpdateView::of(*n);
    if (!u || u->grouped() || !u->info().grouped) continue;  // no multi-tensor form
    auto [it, inserted] = group_of_key.emplace(keyOf(*u), groups.size());
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

absl::StatusOr<bool> GroupUpdates::run(ir::Module& m) {
  bool changed = false;
  for (const auto& g : m.graphs()) {
    ASSIGN_OR_RETURN(bool c, groupGraph(*g));
    changed |= c;
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> GroupUpdates::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new GroupUpdates());
}

}  // namespace tandem::passes
