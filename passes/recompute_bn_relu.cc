#include "passes/recompute_bn_relu.h"

#include <algorithm>
#include <vector>

#include "ir/op_views.h"
#include "ir/placement.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"
#include "passes/naming.h"

namespace tandem::passes {
namespace {

using ir::Node;
using ir::Op;
using ir::Value;

/// One forward output to recompute: the apply node, its backward readers (operand slots),
/// and where the recompute goes (the first of them).
struct Recompute {
  Node* apply;
  std::vector<std::pair<Node*, size_t>> readers;
  size_t at;
};

/// "stage1.block0.relu.1" -> "stage1.block0.relu.recomputed.1" (the replica suffix last).
std::string recomputedName(const ir::Module& m, const Value& v) {
  if (auto d = ir::deviceIndexOfValue(m, v); d && m.isReplicated())
    return tagReplica(v.name(), *d, "recomputed");
  return v.name() + ".recomputed";
}

absl::StatusOr<bool> recomputeGraph(const ir::Module& m, ir::Graph& g) {
  // The candidates first, then one sweep over every operand files the backward readers of
  // each: users() would index every value of the graph (a hash map of vectors, millions of
  // allocations at thousands of devices) to ask about a few hundred.
  std::vector<Recompute> todo;
  constexpr uint32_t kNotACandidate = ~uint32_t{0};
  std::vector<uint32_t> candidate(g.idBound(), kNotACandidate);  // by node id: index in todo
  for (const auto& n : g.nodes()) {
    // y, stats, gamma, beta, running_mean, running_var: relu and no residual.
    if (!ir::BatchNormApplyView::is(*n)) continue;
    const ir::BatchNormApplyView apply(*n);
    if (!apply.relu() || apply.residual() != nullptr) continue;
    const Value* out = n->result(0);
    if (std::find(g.outputs().begin(), g.outputs().end(), out) != g.outputs().end()) continue;
    candidate[n->id()] = static_cast<uint32_t>(todo.size());
    todo.push_back({n.get(), {}, SIZE_MAX});
  }
  for (size_t i = 0; i < g.numNodes(); ++i) {
    Node* u = g.nodes()[i].get();
    if (!u->info().has(ir::kBackward)) continue;
    for (size_t k = 0; k < u->numOperands(); ++k) {
      const Value* o = u->operand(k);
      if (o->index() != 0) continue;
      const uint32_t c = candidate[o->def()->id()];
      if (c == kNotACandidate) continue;
      todo[c].readers.emplace_back(u, k);
      todo[c].at = std::min(todo[c].at, i);
    }
  }
  std::erase_if(todo, [](const Recompute& r) { return r.readers.empty(); });
  if (todo.empty()) return false;
  // Every reader comes after its apply node, so `at` >= 1: right after position at - 1.
  Insertions insert(g);
  for (const Recompute& r : todo) {
    const Node& a = *r.apply;
    const ir::BatchNormApplyView apply(a);
    ASSIGN_OR_RETURN(Node * again,
                     insert.add(r.at - 1, ir::BatchNormRecomputeArgs{.y = apply.y(),
                                                                     .stats = apply.stats(),
                                                                     .gamma = apply.gamma(),
                                                                     .beta = apply.beta(),
                                                                     .eps = apply.eps(),
                                                                     .relu = true}
                                              .spec({.device = a.device(),
                                                     .names = {recomputedName(m, *apply.out())},
                                                     .scope = a.scope() + " (recomputed)",
                                                     .location = a.location()})));
    for (auto [reader, slot] : r.readers) reader->setOperand(slot, again->result(0));
  }
  insert.apply();
  return true;
}

}  // namespace

absl::StatusOr<bool> RecomputeBnRelu::run(ir::Module& m) {
  bool changed = false;
  for (const auto& g : m.graphs()) {
    ASSIGN_OR_RETURN(bool c, recomputeGraph(m, *g));
    changed = changed || c;
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> RecomputeBnRelu::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new RecomputeBnRelu());
}

}  // namespace tandem::passes
