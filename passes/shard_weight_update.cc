#include "passes/shard_weight_update.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"
#include "passes/naming.h"

namespace tandem::passes {
namespace {

using ir::Node;
using ir::Value;

absl::Status failure(absl::string_view msg) {
  return absl::FailedPreconditionError(absl::StrCat(ShardWeightUpdate::kName, ": ", msg));
}

/// A gradient bucket as insert-collectives wrote it: flat, one all_reduce over every
/// device; hierarchical (groups > 1), an all_reduce within the groups, one across the
/// groups' first devices and a broadcast back. grads(d, i) is device d's gradient of
/// tensor i before the reduction, updates[d][i] the update that reads it reduced.
struct Bucket {
  std::vector<Node*> collectives;  // in graph order; the first one packs
  int64_t id;
  int64_t groups;
  std::vector<std::vector<Node*>> updates;

  Value* grad(size_t d, size_t i) const {
    return collectives[0]->operand(d * updates[0].size() + i);
  }
};

/// The collective whose every result `i` feeds, or null.
Node* collectiveOf(const std::vector<Value*>& values, size_t i) {
  Node* def = values[i]->def();
  return ir::CollectiveView::is(*def) ? def : nullptr;
}

/// The collectives of a bucket whose reduced gradients `reader` hands to the updates (its
/// results, device-major): itself if a flat all_reduce over every device, or the chain
/// all_reduce (groups=G) -> all_reduce (the groups' first devices) -> broadcast (groups=G)
/// that insert-collectives{groups=G} writes. An error names any other shape.
absl::StatusOr<std::pair<std::vector<Node*>, int64_t>> reductionOf(const ir::Module& m,
                                                                   Node* reader) {
  auto refuse = [&](absl::string_view why) {
    return failure(absl::StrCat(reader->describe(), " hands the optimizer updates gradients ", why,
                                "; shard-weight-update shards an all_reduce over every device "
                                "or insert-collectives{groups=G}'s hierarchical one"));
  };
  const ir::CollectiveView c(*reader);
  if (c.kind() == ir::CollectiveKind::kReduce) {
    if (c.numGroups() != 1 || c.devices() != m.devices())
      return refuse(c.numGroups() != 1 ? "reduced only within groups"
                                       : "reduced over a part of "
                                         "the devices");
    return std::pair{std::vector<Node*>{reader}, int64_t{1}};
  }
  if (c.kind() != ir::CollectiveKind::kBroadcast || c.devices() != m.devices())
    return refuse(absl::StrCat("by a ", reader->opName(), " that is not a gradient reduction"));
  const int64_t groups = c.numGroups();
  Node* cross = collectiveOf(reader->operands(), 0);
  if (cross == nullptr || ir::collectiveKind(*cross) != ir::CollectiveKind::kReduce)
    return refuse("broadcast from something other than an all_reduce across the groups");
  Node* within = collectiveOf(cross->operands(), 0);
  if (within == nullptr || ir::collectiveKind(*within) != ir::CollectiveKind::kReduce ||
      ir::CollectiveView(*within).numGroups() != groups ||
      ir::CollectiveView(*within).devices() != m.devices())
    return refuse("reduced across the groups from something other than an all_reduce within them");
  // Every operand from the collective before it, in the order insert-collectives writes.
  const size_t k = within->numResults() / m.devices().size();
  const size_t per_group = m.devices().size() / static_cast<size_t>(groups);
  if (cross->numOperands() != k * static_cast<size_t>(groups) ||
      reader->numOperands() != cross->numResults())
    return refuse("in a hierarchical reduction of another shape");
  for (size_t r = 0; r < cross->numOperands(); ++r)
    if (cross->operand(r) != within->result((r / k) * per_group * k + r % k))
      return refuse("in a hierarchical reduction of another shape");
  for (size_t r = 0; r < reader->numOperands(); ++r)
    if (reader->operand(r) != cross->result(r))
      return refuse("in a hierarchical reduction of another shape");
  return std::pair{std::vector<Node*>{within, cross, reader}, groups};
}

/// The gradient buckets of @train_step, whose reductions the optimizer updates read, in
/// graph order.
absl::StatusOr<std::vector<Bucket>> findBuckets(const ir::Module& m, ir::Graph& g) {
  absl::flat_hash_map<const Value*, Node*> update_of;  // gradient -> its update
  for (const auto& n : g.nodes()) {
    if (n->op() == ir::Op::kClipGradNorm)
      return failure(
          absl::StrCat(n->describe(),
                       " clips the all-reduced gradients; clipping a sharded update needs "
                       "the norm's squares summed per shard and all-reduced, which is not "
                       "built yet (leave out clip-grad-norm or shard-weight-update)"));
    std::optional<ir::UpdateView> u = ir::UpdateView::of(*n);
    if (!u) continue;
    if (u->info().sharded_of)
      return failure(absl::StrCat("@", g.name(), " is sharded already (", n->describe(), ")"));
    if (u->grouped())
      return failure(
          absl::StrCat(n->describe(), " is grouped; run shard-weight-update before group-updates"));
    if (!u->info().sharded)
      return failure(absl::StrCat(n->describe(), ": ", n->opName(), " has no flat-shard form"));
    if (!ir::ParamView::is(*u->param(0)->def()))
      return failure(absl::StrCat(n->describe(), " does not read its weight from a variable"));
    update_of[u->grad(0)] = n.get();
  }
  const size_t devices = m.devices().size();
  std::vector<Bucket> out;
  for (const auto& n : g.nodes()) {
    if (!ir::CollectiveView::is(*n)) continue;
    size_t fed = 0;
    for (size_t r = 0; r < n->numResults(); ++r) fed += update_of.contains(n->result(r));
    if (fed == 0) continue;  // the loss, the correct count, sync batch norm's statistics
    for (size_t r = 0; r < n->numResults(); ++r)
      if (!update_of.contains(n->result(r)))
        return failure(absl::StrCat(n->describe(), " also gives %", n->result(r)->name(),
                                    ", which no optimizer update reads"));
    ASSIGN_OR_RETURN(auto reduction, reductionOf(m, n.get()));
    const size_t k = n->numResults() / devices;
    const int64_t id = ir::CollectiveView(*reduction.first[0]).bucket().value_or(0);
    Bucket b{std::move(reduction.first), id, reduction.second,
             std::vector<std::vector<Node*>>(devices)};
    for (size_t d = 0; d < devices; ++d)
      for (size_t i = 0; i < k; ++i) b.updates[d].push_back(update_of.at(n->result(d * k + i)));
    // One flat-shard update per device steps the whole shard: one optimizer, one setting.
    const Node& first = *b.updates[0][0];
    const bool scaled = ir::UpdateView::of(first)->lrScale() != nullptr;
    for (const auto& per_device : b.updates)
      for (const Node* u : per_device)
        if (u->op() != first.op() || u->attrs() != first.attrs() ||
            (ir::UpdateView::of(*u)->lrScale() != nullptr) != scaled)
          return failure(absl::StrCat(u->describe(), " and ", first.describe(), " share bucket ",
                                      b.id, " but not their optimizer and its settings"));
    out.push_back(std::move(b));
  }
  if (out.empty())
    return failure(absl::StrCat("@", g.name(),
                                " has no gradient all_reduce that optimizer updates read (run "
                                "insert-collectives first)"));
  return out;
}

/// `v` as a flat (rank-1) value: itself, or a reshape to [-1] added at `at`.
absl::StatusOr<Value*> flat(Insertions& insert, size_t at, Value* v, size_t d,
                            const std::optional<ir::Device>& device) {
  if (v->type().rank() == 1) return v;
  ASSIGN_OR_RETURN(
      Node * r,
      insert.add(at, ir::ReshapeArgs{.x = v, .shape = std::vector<int64_t>{-1}}.spec(
                         {.device = device, .names = {tagReplica(v->name(), d, "flat")}})));
  return r->result();
}

/// `parts` joined along axis 0 (one part: itself).
absl::StatusOr<Value*> join(Insertions& insert, size_t at, std::vector<Value*> parts,
                            std::string name, const std::optional<ir::Device>& device) {
  if (parts.size() == 1) return parts[0];
  ASSIGN_OR_RETURN(Node * c,
                   insert.add(at, ir::ConcatAxisArgs{.xs = std::move(parts), .axis = 0}.spec(
                                      {.device = device, .names = {std::move(name)}})));
  return c->result();
}

/// Elements [start, end) of the flat `v` (all of it: itself).
absl::StatusOr<Value*> slice(Insertions& insert, size_t at, Value* v, int64_t start, int64_t end,
                             std::string name, const std::optional<ir::Device>& device) {
  if (start == 0 && end == v->type().numElements()) return v;
  ASSIGN_OR_RETURN(
      Node * s,
      insert.add(at, ir::SliceAxisArgs{.x = v, .axis = 0, .start = start, .end = end}.spec(
                         {.device = device, .names = {std::move(name)}})));
  return s->result();
}

class Sharder {
 public:
  Sharder(ir::Module& m, ir::Graph& g) : m_(m), g_(g), insert_(g), pos_(g.positions()) {}

  absl::Status shard(const Bucket& b) {
    const size_t devices = m_.devices().size();
    const std::vector<Node*>& first = b.updates[0];
    const ir::UpdateView u0 = *ir::UpdateView::of(*first[0]);
    // The packing and the reduce_scatter where the (first) all_reduce was; the step, the
    // all_gather and the writes where the bucket's last update was (after every operand the
    // updates read, such as the schedule's factor).
    const size_t at = pos_.at(b.collectives[0]);
    size_t last = at;
    for (const auto& per_device : b.updates)
      for (const Node* u : per_device) last = std::max(last, pos_.at(u));
    const std::string base = absl::StrCat("bucket", b.id);
    // Where each tensor's elements start in the packed bucket, and the shards.
    std::vector<int64_t> start;
    int64_t total = 0;
    for (const Node* u : first) {
      start.push_back(total);
      total += ir::UpdateView::of(*u)->param(0)->type().numElements();
    }
    // Sharded within each group of `per_group` devices (all of them when flat): rank r of
    // every group steps the same shard, sizes[r] elements from offsets[r].
    const size_t per_group = devices / static_cast<size_t>(b.groups);
    const int64_t ranks = static_cast<int64_t>(per_group);
    if (total < ranks)
      return failure(absl::StrCat("bucket ", b.id, " (", b.collectives[0]->describe(), ") holds ",
                                  total, " elements, fewer than the ", ranks,
                                  " devices it is sharded over: every device's shard needs one"));
    if (b.groups > 1 && per_group > 1)
      for (size_t g = 1; g < static_cast<size_t>(b.groups); ++g)
        if (m_.devices()[g * per_group + 1].rank != m_.devices()[1].rank)
          return failure(absl::StrCat(
              "bucket ", b.id, " is reduced in groups that span processes; sharded within them, ",
              ir::toString(m_.devices()[1]), " and ", ir::toString(m_.devices()[g * per_group + 1]),
              " would all-reduce their shards across processes, and a process runs its "
              "collectives across processes on its first device only (across processes, shard "
              "the flat reduction, insert-collectives without groups: the reduce_scatter then "
              "spans the processes)"));
    std::vector<int64_t> sizes(per_group, total / ranks), offsets(per_group, 0);
    for (int64_t r = 0; r < total % ranks; ++r) ++sizes[r];
    for (size_t r = 1; r < per_group; ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
    // The state as sharded variables standing for the per-parameter ones.
    std::vector<std::string> state_vars;
    for (size_t s = 0; s < u0.presentStates().size(); ++s) {
      const ir::OptimizerStateSpec& spec = u0.info().states[u0.presentStates()[s]];
      ir::Var var{.name = absl::StrCat(base, ".", spec.var_suffix),
                  .type = spec.scalar ? ir::TensorType{ir::DType::kF32, {1}}
                                      : ir::TensorType{ir::DType::kF32, {total}},
                  .role = ir::VarRole::kOptimizer,
                  .init = ir::Initializer{spec.init}};
      if (!spec.scalar) {
        for (size_t d = 0; d < devices; ++d) var.shards.push_back(sizes[d % per_group]);
        var.shard_groups = b.groups;
      }
      for (const Node* u : first) {
        const Node* def = u->operand(ir::UpdateView::of(*u)->stateOperand(0, s))->def();
        const std::string name = ir::ParamView(*def).var();
        var.packs.push_back({name, m_.findVar(name)->type});
        dropped_.insert(name);
      }
      if (m_.findVar(var.name) != nullptr)
        return failure(absl::StrCat("the sharded state @", var.name,
                                    " would take the name of a variable the module has"));
      state_vars.push_back(var.name);
      RETURN_IF_ERROR(m_.addVar(std::move(var)));  // before the params that read it
    }
    std::vector<Value*> packed(devices), stepped(devices);
    for (size_t d = 0; d < devices; ++d) {
      std::vector<Value*> grads;
      for (size_t i = 0; i < first.size(); ++i) {
        ASSIGN_OR_RETURN(Value * g, flat(insert_, at, b.grad(d, i), d, m_.devices()[d]));
        grads.push_back(g);
      }
      ASSIGN_OR_RETURN(packed[d], join(insert_, at, std::move(grads),
                                       replicaName(base + ".grad", d), m_.devices()[d]));
    }
    std::vector<std::string> shard_names;
    for (size_t d = 0; d < devices; ++d)
      shard_names.push_back(replicaName(base + ".grad.shard", d));
    ASSIGN_OR_RETURN(Node * rs, insert_.add(at, ir::ReduceScatterArgs{.xs = packed,
                                                                      .op = ir::ReduceOp::kSum,
                                                                      .bucket = b.id,
                                                                      .sizes = sizes,
                                                                      .devices = m_.devices(),
                                                                      .groups = b.groups}
                                                    .spec({.names = std::move(shard_names)})));
    ASSIGN_OR_RETURN(std::vector<Value*> grad_shards, acrossGroups(rs, b, sizes, at));
    for (size_t d = 0; d < devices; ++d) {
      const std::optional<ir::Device> dev = m_.devices()[d];
      const int64_t offset = offsets[d % per_group], size = sizes[d % per_group];
      // The weights' elements in [offset, offset + size): pieces of the tensors there.
      std::vector<Value*> pieces;
      for (size_t i = 0; i < first.size(); ++i) {
        Value* w = ir::UpdateView::of(*b.updates[d][i])->param(0);
        const int64_t lo = std::max(offset, start[i]);
        const int64_t hi = std::min(offset + size, start[i] + w->type().numElements());
        if (lo >= hi) continue;
        ASSIGN_OR_RETURN(Value * f, flat(insert_, last, w, d, dev));
        ASSIGN_OR_RETURN(Value * p, slice(insert_, last, f, lo - start[i], hi - start[i],
                                          tagReplica(w->name(), d, "piece"), dev));
        pieces.push_back(p);
      }
      ASSIGN_OR_RETURN(Value * w_shard, join(insert_, last, std::move(pieces),
                                             replicaName(base + ".w.shard", d), dev));
      // The flat-shard update: the single update's operands, with the shards in place.
      const Node& single = *b.updates[d][0];
      const ir::UpdateView u = *ir::UpdateView::of(single);
      std::vector<Value*> operands = single.operands();
      operands[u.paramOperand(0)] = w_shard;
      operands[u.gradOperand(0)] = grad_shards[d];
      for (size_t s = 0; s < state_vars.size(); ++s) {
        ASSIGN_OR_RETURN(
            Node * p,
            insert_.add(last, ir::ParamArgs{.var = state_vars[s]}.spec(
                                  {.device = dev, .names = {replicaName(state_vars[s], d)}})));
        operands[u.stateOperand(0, s)] = p->result();
      }
      ASSIGN_OR_RETURN(
          Node * step,
          insert_.add(last, ir::NodeSpec{.op = *u.info().sharded,
                                         .operands = std::move(operands),
                                         .attr_values = single.attrs(),
                                         .device = dev,
                                         .names = {replicaName(base + ".w.stepped", d)},
                                         .scope = single.scope()}));
      stepped[d] = step->result();
    }
    std::vector<std::string> gathered_names;
    for (size_t d = 0; d < devices; ++d) gathered_names.push_back(replicaName(base + ".w", d));
    ASSIGN_OR_RETURN(Node * ag, insert_.add(last, ir::AllGatherArgs{.xs = stepped,
                                                                    .bucket = b.id,
                                                                    .devices = m_.devices(),
                                                                    .groups = b.groups}
                                                      .spec({.names = std::move(gathered_names)})));
    // Each weight cut back out of the gathered bucket and written to its variable.
    for (size_t d = 0; d < devices; ++d) {
      const std::optional<ir::Device> dev = m_.devices()[d];
      for (size_t i = 0; i < first.size(); ++i) {
        Value* w = ir::UpdateView::of(*b.updates[d][i])->param(0);
        const ir::TensorType& type = w->type();
        ASSIGN_OR_RETURN(
            Value * v, slice(insert_, last, ag->result(d), start[i], start[i] + type.numElements(),
                             tagReplica(w->name(), d, "gathered"), dev));
        if (type.rank() != 1) {
          ASSIGN_OR_RETURN(
              Node * r,
              insert_.add(
                  last,
                  ir::ReshapeArgs{
                      .x = v, .shape = std::vector<int64_t>(type.shape.begin(), type.shape.end())}
                      .spec({.device = dev, .names = {tagReplica(w->name(), d, "stepped")}})));
          v = r->result();
        }
        RETURN_IF_ERROR(
            insert_
                .add(last, ir::AssignArgs{.value = v, .var = ir::ParamView(*w->def()).var()}.spec(
                               {.device = dev}))
                .status());
      }
    }
    erased_.insert(b.collectives.begin(), b.collectives.end());
    for (const auto& per_device : b.updates) erased_.insert(per_device.begin(), per_device.end());
    return absl::OkStatus();
  }

  /// Each device's shard of the bucket's gradient sum: the reduce_scatter's results when
  /// flat; hierarchical, the group sums' shards all-reduced across the groups, among the
  /// devices of one rank (devices r, P + r, 2P + r, ...: G consecutive ones of the list, in
  /// the order of the groups' first devices, so each element adds up as the unsharded
  /// reduction adds it). An all_reduce's operands have one type, so the ranks whose shards
  /// hold one more element (the bucket does not divide) have their own.
  absl::StatusOr<std::vector<Value*>> acrossGroups(Node* rs, const Bucket& b,
                                                   const std::vector<int64_t>& sizes, size_t at) {
    const size_t devices = m_.devices().size(), groups = static_cast<size_t>(b.groups);
    std::vector<Value*> out(devices);
    for (size_t d = 0; d < devices; ++d) out[d] = rs->result(d);
    if (groups == 1) return out;
    const size_t per_group = sizes.size();
    for (size_t first = 0; first < per_group;) {
      size_t end = first;
      while (end < per_group && sizes[end] == sizes[first]) ++end;
      std::vector<Value*> xs;
      std::vector<ir::Device> by_rank;
      std::vector<std::string> names;
      for (size_t r = first; r < end; ++r)
        for (size_t g = 0; g < groups; ++g) {
          const size_t d = g * per_group + r;
          xs.push_back(rs->result(d));
          by_rank.push_back(m_.devices()[d]);
          names.push_back(replicaName(absl::StrCat("bucket", b.id, ".grad.shard.sum"), d));
        }
      ASSIGN_OR_RETURN(
          Node * cross,
          insert_.add(at, ir::AllReduceArgs{.xs = std::move(xs),
                                            .op = ir::ReduceOp::kSum,
                                            .bucket = b.id,
                                            .devices = std::move(by_rank),
                                            .groups = static_cast<int64_t>(end - first)}
                              .spec({.names = std::move(names)})));
      for (size_t r = first; r < end; ++r)
        for (size_t g = 0; g < groups; ++g)
          out[g * per_group + r] = cross->result((r - first) * groups + g);
      first = end;
    }
    return out;
  }

  /// Splices the new nodes in, drops the replaced ones and the per-parameter state, and
  /// initializes the sharded state in @init (zeros or ones: no broadcast needed).
  absl::Status finish() {
    insert_.apply();
    auto reads_dropped = [&](const Node& n) {
      const std::string* var = ir::variableOf(n);
      return var != nullptr && dropped_.contains(*var);
    };
    g_.eraseIf([&](const Node& n) { return erased_.contains(&n); });
    for (const auto& g : m_.graphs()) {
      const auto users = g->users();
      for (const auto& n : g->nodes()) {
        if (!reads_dropped(*n)) continue;
        for (size_t r = 0; r < n->numResults(); ++r)
          if (auto it = users.find(n->result(r)); it != users.end())
            for (const Node* user : it->second)
              if (!ir::AssignView::is(*user) || !reads_dropped(*user))
                return failure(absl::StrCat(user->describe(), " reads the optimizer state %",
                                            n->result(r)->name(), ", which sharding replaces"));
      }
      g->eraseIf(reads_dropped);
    }
    m_.removeVars(dropped_);
    if (ir::Graph* init = m_.graph(ir::kInitGraph)) {
      for (const ir::Var& v : m_.vars()) {
        if (v.packs.empty()) continue;
        for (size_t d = 0; d < m_.devices().size(); ++d) {
          const std::optional<ir::Device> dev = m_.devices()[d];
          ASSIGN_OR_RETURN(Node * value, init->create(ir::InitializeArgs{.var = v.name}.spec(
                                             {.device = dev, .names = {replicaName(v.name, d)}})));
          RETURN_IF_ERROR(init->create(ir::AssignArgs{.value = value->result(), .var = v.name}.spec(
                                           {.device = dev}))
                              .status());
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  ir::Module& m_;
  ir::Graph& g_;
  Insertions insert_;
  const ir::Graph::Positions pos_;
  absl::flat_hash_set<const Node*> erased_;
  absl::flat_hash_set<std::string> dropped_;  // the per-parameter state variables
};

}  // namespace

absl::StatusOr<bool> ShardWeightUpdate::run(ir::Module& m) {
  ir::Graph* g = m.graph(ir::kTrainGraph);
  if (g == nullptr)
    return failure(absl::StrCat("module @", m.name(), " has no @", ir::kTrainGraph));
  if (m.devices().size() < 2)
    return failure(absl::StrCat(
        "the module runs on ", m.devices().size(), " device",
        m.devices().size() == 1 ? absl::StrCat(" (", ir::toString(m.devices()[0]), ")") : "s",
        "; sharding the weight update needs two or more (replicate{devices=N}, N >= 2)"));
  ASSIGN_OR_RETURN(std::vector<Bucket> buckets, findBuckets(m, *g));
  Sharder sharder(m, *g);
  for (const Bucket& b : buckets) RETURN_IF_ERROR(sharder.shard(b));
  RETURN_IF_ERROR(sharder.finish());
  return true;
}

absl::StatusOr<std::unique_ptr<Pass>> ShardWeightUpdate::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new ShardWeightUpdate());
}

}  // namespace tandem::passes
