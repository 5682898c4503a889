#include "ir/verifier.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/placement.h"
#include "ir/plan_verifier.h"
#include "ir/predict_graph.h"

namespace tandem::ir {
namespace {

class GraphVerifier {
 public:
  explicit GraphVerifier(const Graph& g) : g_(g), m_(*g.module()) {}

  absl::Status run() {
    for (const auto& n : g_.nodes()) {
      if (absl::Status s = checkNode(*n); !s.ok()) return s;
      for (size_t i = 0; i < n->numResults(); ++i) defined_.insert(n->result(i));
    }
    for (const Value* v : g_.outputs())
      if (!defined_.contains(v))
        return fail(absl::StrCat("returns %", v->name(), ", which no node of the graph defines"));
    if (g_.name() == kPredictGraph) {
      if (absl::Status s = verifyPredictGraph(g_); !s.ok()) return s;
    }
    return checkGradients();
  }

 private:
  absl::Status fail(absl::string_view msg) const {
    return absl::FailedPreconditionError(absl::StrCat("graph @", g_.name(), ": ", msg));
  }
  absl::Status failAt(const Node& n, absl::string_view msg) const {
    return fail(absl::StrCat(n.describe(), ": ", msg));
  }

  absl::Status checkNode(const Node& n) {
    for (size_t i = 0; i < n.numOperands(); ++i)
      if (!defined_.contains(n.operand(i)))
        return failAt(n, absl::StrCat("operand ", i, " %", n.operand(i)->name(),
                                      " is not defined before this node (operands must come "
                                      "from earlier nodes of the same graph)"));
    // Types and shapes agree: the stored result types are what the shape rule gives.
    auto inferred = inferTypes(n);
    if (!inferred.ok()) return failAt(n, inferred.status().message());
    if (inferred->size() != n.numResults())
      return failAt(n, absl::StrCat("has ", n.numResults(), " results, its shape rule gives ",
                                    inferred->size()));
    for (size_t i = 0; i < n.numResults(); ++i)
      if ((*inferred)[i] != n.result(i)->type())
        return failAt(n, absl::StrCat("result %", n.result(i)->name(), " has type ",
                                      toString(n.result(i)->type()), ", expected ",
                                      toString((*inferred)[i])));
    if (absl::Status s = checkPlacement(n); !s.ok()) return s;
    return checkState(n);
  }

  absl::Status checkPlacement(const Node& n) {
    const OpInfo& info = n.info();
    if (!m_.isReplicated()) {
      if (info.has(kCollective))
        return failAt(n, "collectives need a replicated module (run replicate first)");
      if (n.device()) return failAt(n, "is placed on a device but the module is not replicated");
      return absl::OkStatus();
    }
    if (std::optional<CollectiveView> c = CollectiveView::of(n)) {
      const auto& ds = c->devices();
      absl::flat_hash_set<Device> listed;
      for (const Device& d : ds) {
        if (!m_.deviceIndex(d))
          return failAt(n, absl::StrCat("lists ", toString(d), ", which is not a module device ",
                                        toString(m_.devices())));
        if (!listed.insert(d).second)
          return failAt(n, absl::StrCat("lists ", toString(d),
                                        " twice; a device takes one part in a collective (device "
                                        "groups may not overlap)"));
      }
      if (c->info().reads == CollectiveReads::kModuleDevices) {
        // One slice from every module device, in module order.
        const auto& md = m_.devices();
        if (n.numOperands() != md.size())
          return failAt(n, absl::StrCat("gathers ", n.numOperands(),
                                        " slices, expected one from each of ", toString(md)));
        for (size_t i = 0; i < md.size(); ++i)
          if (n.operand(i)->device() != md[i])
            return failAt(n, absl::StrCat("operand ", i, " %", n.operand(i)->name(), " is on ",
                                          n.operand(i)->device() ? toString(*n.operand(i)->device())
                                                                 : std::string("the host"),
                                          ", expected ", toString(md[i])));
        return absl::OkStatus();
      }
      // Any set of module devices may run a collective (a group of processes, the
      // leaders of groups): each collective is one node, so every device it spans issues
      // it at the same point of its comm stream's order.
      if (c->info().reads == CollectiveReads::kPerDevice) {
        size_t k = n.numOperands() / ds.size();
        for (size_t i = 0; i < n.numOperands(); ++i)
          if (n.operand(i)->device() != ds[i / k])
            return failAt(n, absl::StrCat("operand ", i, " %", n.operand(i)->name(), " is on ",
                                          n.operand(i)->device() ? toString(*n.operand(i)->device())
                                                                 : std::string("the host"),
                                          ", expected ", toString(ds[i / k]),
                                          " (operands are grouped by device)"));
      }
      if (c->info().reads == CollectiveReads::kGroupSource) {
        const std::vector<std::vector<size_t>> groups = c->groups();
        const size_t k = n.numOperands() / groups.size();
        for (size_t i = 0; i < n.numOperands(); ++i) {
          const auto& group = groups[i / k];
          const auto& od = n.operand(i)->device();
          bool in_group = false;
          for (size_t pos : group) in_group = in_group || (od && *od == ds[pos]);
          if (in_group) continue;
          std::vector<Device> members;
          for (size_t pos : group) members.push_back(ds[pos]);
          return failAt(n, absl::StrCat("operand ", i, " %", n.operand(i)->name(), " is on ",
                                        od ? toString(*od) : std::string("the host"),
                                        ", expected a device of ",
                                        groups.size() == 1 ? std::string("the broadcast ")
                                                           : absl::StrCat("group ", i / k, " "),
                                        toString(members), " (its source)"));
        }
      }
      return absl::OkStatus();
    }
    if (!n.device()) {
      if (n.op() == Op::kInput) return absl::OkStatus();  // host data, split by a collective
      return failAt(n, absl::StrCat("is not placed; every node of a replicated module needs a "
                                    "device from ",
                                    toString(m_.devices())));
    }
    if (!m_.deviceIndex(*n.device()))
      return failAt(n, absl::StrCat("is placed on ", toString(*n.device()),
                                    ", which is not a module device ", toString(m_.devices())));
    for (size_t i = 0; i < n.numOperands(); ++i) {
      const auto& od = n.operand(i)->device();
      if (od == n.device()) continue;
      return failAt(n, absl::StrCat("operand ", i, " %", n.operand(i)->name(), " is on ",
                                    od ? toString(*od) : std::string("the host"), ", expected ",
                                    toString(*n.device()),
                                    " (only collectives move values between devices)"));
    }
    return absl::OkStatus();
  }

  // Key of one variable replica: device index in the module plus the variable name.
  std::string replicaKey(const Node& n, const std::string& var) const {
    return n.device() ? absl::StrCat(toString(*n.device()), "/", var) : var;
  }

  absl::Status checkState(const Node& n) {
    if (ParamView::is(n)) {
      const std::string var = ParamView(n).var();
      auto it = writes_.find(replicaKey(n, var));
      if (it != writes_.end())
        return failAt(n, absl::StrCat("reads @", var, " after ", it->second->describe(),
                                      " wrote it; reads must come before the write"));
    }
    if (n.info().rules->writes == nullptr) return absl::OkStatus();
    for (const std::string& var : n.info().rules->writes(n)) {
      auto [it, inserted] = writes_.emplace(replicaKey(n, var), &n);
      if (!inserted)
        return failAt(n, absl::StrCat("writes @", var, " again; ", it->second->describe(),
                                      " already wrote it in this graph"));
    }
    return absl::OkStatus();
  }

  // How many devices' local values a value sums: 1 for a local value; an all_reduce (or
  // reduce_scatter) result adds up its group (each member bringing what its operand sums);
  // a broadcast passes its source on, an all_gather its device's shard. Flat: D x 1;
  // hierarchical: leaders x (group size x 1), shared back.
  static size_t devicesReducedInto(const Value& v) {
    const Node* def = v.def();
    std::optional<CollectiveView> c = def != nullptr ? CollectiveView::of(*def) : std::nullopt;
    if (!c || !(isReduction(*def) || passesOn(*def))) return 1;
    // The operand that result v is made of: the same place in what its share reads.
    const size_t pos = c->positionOfResult(static_cast<size_t>(v.index()));
    const IndexRange in = c->readsAt(pos);
    const size_t j = static_cast<size_t>(v.index()) - c->writesAt(pos).begin;
    const size_t from =
        devicesReducedInto(*def->operand(in.begin + j % std::max<size_t>(in.size(), 1)));
    if (passesOn(*def)) return from;
    return c->devices().size() / static_cast<size_t>(c->numGroups()) * from;
  }

  // Collectives that add devices' values up (all of a shard's elements are sums too).
  static bool isReduction(const Node& n) {
    const std::optional<CollectiveKind> k = collectiveKind(n);
    return k == CollectiveKind::kReduce || k == CollectiveKind::kReduceScatter;
  }
  // Collectives that copy reduced values on as they are.
  static bool passesOn(const Node& n) {
    const std::optional<CollectiveKind> k = collectiveKind(n);
    return k == CollectiveKind::kBroadcast || k == CollectiveKind::kAllGather;
  }

  // Each replica's gradient feeds exactly one all_reduce, and (with several devices and
  // collectives inserted) every parameter update uses an all-reduced gradient (clipped by
  // clip_grad_norm or not).
  absl::Status checkGradients() {
    absl::flat_hash_map<const Value*, const Node*> reduced_by;
    bool any_all_reduce = false;
    for (const auto& n : g_.nodes()) {
      if (!isReduction(*n)) continue;
      any_all_reduce = true;
      for (const Value* v : n->operands()) {
        auto [it, inserted] = reduced_by.emplace(v, n.get());
        if (!inserted)
          return failAt(*n, absl::StrCat("%", v->name(), " is all-reduced twice (also by ",
                                         it->second->describe(), "); expected exactly one"));
      }
    }
    if (!any_all_reduce || m_.devices().size() < 2) return absl::OkStatus();
    for (const auto& n : g_.nodes())
      for (const Value* g : updateGradients(*n)) {
        // Seen through clip_grad_norm: its result i is its operand i, scaled.
        if (g->def() != nullptr && g->def()->op() == Op::kClipGradNorm)
          g = g->def()->operand(static_cast<size_t>(g->index()));
        if (g->def() == nullptr || (!isReduction(*g->def()) && !passesOn(*g->def())))
          return failAt(*n, absl::StrCat("its gradient %", g->name(),
                                         " is not all-reduced across devices; expected it to "
                                         "come from exactly one all_reduce"));
        if (size_t covered = devicesReducedInto(*g); covered != m_.devices().size())
          return failAt(*n, absl::StrCat("its gradient %", g->name(), " is reduced over ", covered,
                                         " of the ", m_.devices().size(),
                                         " devices; every device's gradient must reach it"));
      }
    return absl::OkStatus();
  }

  const Graph& g_;
  const Module& m_;
  absl::flat_hash_set<const Value*> defined_;
  absl::flat_hash_map<std::string, const Node*> writes_;
};

/// A sharded variable (shard-weight-update's state) is flat, one shard of at least one
/// element per module device, the devices cut into `shard_groups` equal groups whose
/// shards each add up to it (the same shards in every group); the variables it packs (checkpoint
/// names) fill it exactly when sharded, and are each its type when not (a bucket's update count).
absl::Status verifyVar(const Module& m, const Var& v) {
  auto fail = [&](absl::string_view msg) {
    return absl::FailedPreconditionError(absl::StrCat("variable @", v.name, ": ", msg));
  };
  if (v.sharded()) {
    if (v.type.rank() != 1)
      return fail(absl::StrCat("is sharded, so it must be flat (rank 1), not ", toString(v.type)));
    if (v.shards.size() != m.devices().size())
      return fail(absl::StrCat("has ", v.shards.size(), " shards for ", m.devices().size(),
                               " module devices; expected one per device"));
    const size_t groups = static_cast<size_t>(v.shard_groups);
    if (v.shard_groups < 1 || v.shards.size() % groups != 0)
      return fail(absl::StrCat("has shard_groups=", v.shard_groups, ", which does not cut its ",
                               v.shards.size(), " shards into equal groups"));
    const size_t per_group = v.shardGroupSize();
    int64_t sum = 0;
    for (size_t d = 0; d < v.shards.size(); ++d) {
      if (v.shards[d] < 1)
        return fail(absl::StrCat("shards[", d, "] is ", v.shards[d],
                                 "; every device's shard holds at least one element"));
      if (v.shards[d] != v.shards[d % per_group])
        return fail(absl::StrCat("shards[", d, "] is ", v.shards[d], " but shards[", d % per_group,
                                 "] is ", v.shards[d % per_group],
                                 "; every shard group is cut the same way"));
      if (d < per_group) sum += v.shards[d];
    }
    if (sum != v.type.numElements())
      return fail(absl::StrCat("shards add up to ", sum, groups > 1 ? " in a shard group" : "",
                               " but ", toString(v.type), " has ", v.type.numElements(),
                               " elements"));
    if (!v.init.isDeterministic())
      return fail(
          absl::StrCat("is sharded, so its initializer must be zeros or ones (each "
                       "device fills its shard alone), not ",
                       toString(v.init)));
  }
  if (!v.sharded() && v.shard_groups != 1)
    return fail(absl::StrCat("has shard_groups=", v.shard_groups, " but no shards"));
  int64_t packed = 0;
  for (const VarPiece& p : v.packs) {
    if (m.findVar(p.var) != nullptr)
      return fail(absl::StrCat("packs @", p.var, ", which the module declares too"));
    if (!v.sharded() && p.type != v.type)
      return fail(absl::StrCat("packs @", p.var, " as ", toString(p.type),
                               "; unsharded, each variable it packs has its type ",
                               toString(v.type)));
    packed += p.type.numElements();
  }
  if (v.sharded() && !v.packs.empty() && packed != v.type.numElements())
    return fail(absl::StrCat("packs variables of ", packed, " elements into ", toString(v.type)));
  return absl::OkStatus();
}

}  // namespace

absl::Status verifyGraph(const Graph& g) { return GraphVerifier(g).run(); }

absl::Status verifyModule(const Module& m) {
  for (const Var& v : m.vars())
    if (absl::Status s = verifyVar(m, v); !s.ok()) return s;
  for (const auto& g : m.graphs())
    if (absl::Status s = verifyGraph(*g); !s.ok()) return s;
  // The plans after the graphs: they are checked against graphs known to be sound.
  for (const auto& g : m.graphs())
    if (absl::Status s = verifyPlan(*g); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace tandem::ir
