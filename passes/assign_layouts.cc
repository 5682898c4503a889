#include "passes/assign_layouts.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "ir/layout_rules.h"
#include "ir/plan.h"
#include "ir/status_macros.h"

namespace tandem::passes {
namespace {

/// Union-find over value indices, with a "must stay plain" mark per group.
class Groups {
 public:
  explicit Groups(size_t n) : parent_(n), plain_(n, false) {
    std::iota(parent_.begin(), parent_.end(), uint32_t{0});
  }
  uint32_t find(uint32_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void join(uint32_t a, uint32_t b) {
    a = find(a), b = find(b);
    if (a == b) return;
    parent_[b] = a;
    plain_[a] = plain_[a] || plain_[b];
  }
  void markPlain(uint32_t i) { plain_[find(i)] = true; }
  bool plain(uint32_t i) { return plain_[find(i)]; }

 private:
  std::vector<uint32_t> parent_;
  std::vector<bool> plain_;
};

// Which values keep their node's target's layout. Values are indexed node by node, a
// node's results from first[id]; target_of is asked once per node.
struct Solution {
  std::vector<uint32_t> first;
  std::vector<const ir::TargetInfo*> target;  // by node id
  std::vector<bool> kept;                     // by value index
};

Solution solve(const ir::Graph& g,
               absl::FunctionRef<const ir::TargetInfo*(const ir::Node&)> target_of) {
  Solution out;
  out.first.assign(g.idBound(), 0);
  out.target.assign(g.idBound(), nullptr);
  uint32_t count = 0;
  for (const auto& n : g.nodes()) {
    out.first[n->id()] = count;
    out.target[n->id()] = target_of(*n);
    count += static_cast<uint32_t>(n->numResults());
  }
  auto index = [&](const ir::Value& v) {
    return out.first[v.def()->id()] + static_cast<uint32_t>(v.index());
  };
  Groups groups(count);
  for (const auto& n : g.nodes())
    for (size_t r = 0; r < n->numResults(); ++r)
      if (!ir::mayKeepLayout(*n->result(r), out.target[n->id()]))
        groups.markPlain(index(*n->result(r)));
  for (const ir::Value* v : g.outputs()) groups.markPlain(index(*v));
  for (const auto& n : g.nodes()) {
    const ir::TargetInfo* t = out.target[n->id()];
    if (t == nullptr) {  // a collective: every 4-D value it touches stays plain
      for (const ir::Value* v : n->operands())
        if (v->type().shape.size() == 4) groups.markPlain(index(*v));
      continue;  // its results are plain from the first sweep
    }
    // The first 4-D value of each link of this node; later ones join it.
    absl::InlinedVector<std::pair<int, uint32_t>, 4> linked;
    auto visit = [&](const ir::Value& v, bool result, size_t slot) {
      // A value that is not 4-D is plain from the first sweep and binds no other slot:
      // skipping it first spares the lookups (half the values of a training step).
      if (v.type().shape.size() != 4) return;
      const uint32_t i = index(v);
      const std::optional<int> link = ir::layoutSlot(t, *n, result, slot);
      if (!link) return groups.markPlain(i);
      for (const auto& [l, j] : linked)
        if (l == *link) return groups.join(j, i);
      linked.push_back({*link, i});
    };
    for (size_t i = 0; i < n->numOperands(); ++i) visit(*n->operand(i), false, i);
    for (size_t r = 0; r < n->numResults(); ++r) visit(*n->result(r), true, r);
  }
  out.kept.resize(count);
  for (uint32_t i = 0; i < count; ++i) out.kept[i] = !groups.plain(i);
  return out;
}

void assignGraph(ir::Graph& g, ir::LayoutTargets& targets) {
  const Solution s = solve(g, [&](const ir::Node& n) { return targets.of(n); });
  ir::GraphPlan& plan = *g.mutablePlan();
  plan.add(ir::PlanPart::kLayouts);
  for (const auto& n : g.nodes()) {
    ir::NodePlan& p = plan.of(*n);
    p.layouts.clear();
    const uint32_t base = s.first[n->id()];
    const uint32_t end = base + static_cast<uint32_t>(n->numResults());
    if (std::find(s.kept.begin() + base, s.kept.begin() + end, true) == s.kept.begin() + end)
      continue;
    for (uint32_t i = base; i < end; ++i)
      p.layouts.push_back(s.kept[i] ? s.target[n->id()]->preferred_layout
                                    : ir::ActivationLayout::kPlain);
  }
}

}  // namespace

absl::StatusOr<bool> AssignLayouts::run(ir::Module& m) {
  if (!m.isReplicated())
    return absl::FailedPreconditionError(
        absl::StrCat("assign-layouts: module @", m.name(),
                     " has no devices: layouts belong to devices (run replicate first)"));
  ir::LayoutTargets targets;
  for (const auto& g : m.graphs()) {
    RETURN_IF_ERROR(ir::requirePlanPart(*g, ir::PlanPart::kStreams, "assign-streams"));
    assignGraph(*g, targets);
  }
  return true;
}

absl::flat_hash_set<const ir::Value*> valuesKeptUnder(const ir::Graph& g, const ir::TargetInfo& t) {
  const Solution s = solve(g, [&](const ir::Node&) { return &t; });
  absl::flat_hash_set<const ir::Value*> kept;
  for (const auto& n : g.nodes())
    for (size_t r = 0; r < n->numResults(); ++r)
      if (s.kept[s.first[n->id()] + r]) kept.insert(n->result(r));
  return kept;
}

absl::StatusOr<std::unique_ptr<Pass>> AssignLayouts::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new AssignLayouts());
}

}  // namespace tandem::passes
