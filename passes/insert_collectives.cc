#include "passes/insert_collectives.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/number_format.h"
#include "ir/op_views.h"
#include "ir/predict_graph.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"
#include "passes/naming.h"

namespace tandem::passes {

using ir::Node;
using ir::Op;
using ir::Value;

namespace {

/// An all_reduce (sum) of `operands`, grouped by device with `per_device` each, over
/// `groups` groups of `devices`; results are named after their operands with `tag` (".sum")
/// before the device number `numbers[i / per_device]`.
ir::NodeSpec allReduceSpec(std::vector<Value*> operands, size_t per_device, int64_t bucket,
                           const std::vector<ir::Device>& devices,
                           const std::vector<size_t>& numbers, absl::string_view tag = "sum",
                           int64_t groups = 1) {
  std::vector<std::string> names;
  names.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i)
    names.push_back(tagReplica(operands[i]->name(), numbers[i / per_device], tag));
  return ir::AllReduceArgs{.xs = std::move(operands),
                           .op = ir::ReduceOp::kSum,
                           .bucket = bucket,
                           .devices = devices,
                           .groups = groups}
      .spec({.names = std::move(names)});
}

/// 0, 1, ..., n-1: the replica numbers of every module device.
std::vector<size_t> allNumbers(size_t n) {
  std::vector<size_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

/// Replaces the per-device batch inputs of a step graph by one host input and a split.
absl::Status splitInputs(ir::Module& m, ir::Graph& g) {
  size_t devices = m.devices().size();
  std::vector<std::vector<Node*>> per_device(devices);
  for (Node* in : g.inputs()) {
    size_t d = in->device() ? m.deviceIndex(*in->device()).value_or(SIZE_MAX) : SIZE_MAX;
    if (d == SIZE_MAX)
      return absl::FailedPreconditionError(
          absl::StrCat("insert-collectives: input %", in->result()->name(), " of @", g.name(),
                       " is not on a module device (was the graph already split?)"));
    per_device[d].push_back(in);
  }
  size_t k = per_device[0].size();
  for (size_t d = 1; d < devices; ++d)
    if (per_device[d].size() != k)
      return absl::FailedPreconditionError(
          absl::StrCat("insert-collectives: @", g.name(), " has ", k, " inputs on ",
                       ir::toString(m.devices()[0]), " but ", per_device[d].size(), " on ",
                       ir::toString(m.devices()[d])));
  if (k == 0) return absl::OkStatus();

  absl::flat_hash_map<const Value*, Value*> replace;
  std::vector<std::unique_ptr<Node>> head;  // new host inputs and splits go first
  for (size_t j = 0; j < k; ++j) {
    ir::TensorType global = per_device[0][j]->result()->type();
    global.shape[0] = 0;
    std::vector<int64_t> sizes;
    for (size_t d = 0; d < devices; ++d) {
      const ir::TensorType& t = per_device[d][j]->result()->type();
      ir::TensorType expect = per_device[0][j]->result()->type();
      expect.shape[0] = t.rank() > 0 ? t.shape[0] : 0;
      if (t.rank() == 0 || t != expect)
        return absl::FailedPreconditionError(
            absl::StrCat("insert-collectives: input %", per_device[d][j]->result()->name(), " is ",
                         ir::toString(t), ", which does not match %",
                         per_device[0][j]->result()->name(), " outside the batch axis"));
      sizes.push_back(t.shape[0]);
      global.shape[0] += t.shape[0];
    }
    std::string base = stripReplica(per_device[0][j]->result()->name(), 0);
    auto host = g.create(ir::InputArgs{}.spec({.names = {base}, .declared_types = {global}}));
    if (!host.ok()) return host.status();
    std::vector<std::string> names;
    for (size_t d = 0; d < devices; ++d) names.push_back(per_device[d][j]->result()->name());
    // The split's results take over the replica names; free them first.
    for (size_t d = 0; d < devices; ++d)
      g.rename(per_device[d][j]->result(), per_device[d][j]->result()->name() + ".unsplit");
    auto split = g.create(
        ir::SplitArgs{.x = (*host)->result(), .axis = 0, .sizes = sizes, .devices = m.devices()}
            .spec({.names = names}));
    if (!split.ok()) return split.status();
    for (size_t d = 0; d < devices; ++d) replace[per_device[d][j]->result()] = (*split)->result(d);
  }
  std::vector<std::unique_ptr<Node>> old = g.takeNodes();
  std::vector<std::unique_ptr<Node>> inputs, splits, rest;
  for (auto& n : old) {
    if (ir::InputView::is(*n) && replace.contains(n->result())) continue;  // dropped
    for (size_t i = 0; i < n->numOperands(); ++i)
      if (auto it = replace.find(n->operand(i)); it != replace.end()) n->setOperand(i, it->second);
    if (ir::InputView::is(*n)) {
      inputs.push_back(std::move(n));
    } else if (ir::SplitView::is(*n) && ir::InputView::is(*ir::SplitView(*n).x()->def())) {
      splits.push_back(std::move(n));
    } else {
      rest.push_back(std::move(n));
    }
  }
  for (auto& n : splits) inputs.push_back(std::move(n));
  for (auto& n : rest) inputs.push_back(std::move(n));
  g.setNodes(std::move(inputs));
  return absl::OkStatus();
}

/// Random initial values are drawn once, on the first device, and broadcast; values
/// every device can compute alone (zeros, ones) need no communication.
absl::Status broadcastInit(ir::Module& m, ir::Graph& g) {
  absl::flat_hash_map<absl::string_view, std::vector<Node*>> inits;  // var -> per-device nodes
  for (const auto& n : g.nodes())
    if (ir::InitializeView::is(*n)) inits[ir::InitializeView(*n).var()].push_back(n.get());
  absl::flat_hash_map<const Value*, Value*> replace;
  absl::flat_hash_map<const Node*, bool> drop;
  Insertions insert(g);
  auto pos = g.positions();
  for (const ir::Var& var : m.vars()) {
    if (var.init.isDeterministic()) continue;
    auto it = inits.find(var.name);
    if (it == inits.end()) continue;
    std::vector<Node*> nodes = it->second;
    std::vector<Node*> by_device(m.devices().size(), nullptr);
    for (Node* n : nodes)
      if (n->device())
        if (auto d = m.deviceIndex(*n->device())) by_device[*d] = n;
    Node* root = by_device[0];
    if (root == nullptr) continue;
    std::vector<std::string> names;
    for (size_t d = 0; d < m.devices().size(); ++d)
      names.push_back(replicaName(var.name + ".bcast", d));
    auto b = insert.add(
        pos.at(root),
        ir::BroadcastArgs{.xs = {root->result()}, .devices = m.devices()}.spec({.names = names}));
    if (!b.ok()) return b.status();
    for (size_t d = 0; d < m.devices().size(); ++d) {
      if (by_device[d] == nullptr) continue;
      replace[by_device[d]->result()] = (*b)->result(d);
      if (d > 0) drop[by_device[d]] = true;
    }
  }
  for (const auto& n : g.nodes())
    if (!ir::BroadcastView::is(*n))
      for (size_t i = 0; i < n->numOperands(); ++i)
        if (auto it = replace.find(n->operand(i)); it != replace.end())
          n->setOperand(i, it->second);
  insert.apply();
  g.eraseIf([&](const Node& n) { return drop.contains(&n); });
  return absl::OkStatus();
}

/// The reduction of one bucket (`grads[d][i]`: tensor i on device d) as nodes added after
/// position `last`; returns what device d's update of tensor i reads. Flat: one all_reduce.
/// Hierarchical (groups > 1): within each group, across the groups' first devices, then a
/// broadcast back within each group.
absl::StatusOr<std::vector<std::vector<Value*>>> reduceBucket(
    ir::Module& m, Insertions& insert, size_t last, const std::vector<std::vector<Value*>>& grads,
    int64_t bucket, int64_t groups) {
  const size_t devices = grads.size(), k = grads[0].size();
  std::vector<Value*> operands;
  for (const auto& per_device : grads)
    operands.insert(operands.end(), per_device.begin(), per_device.end());
  const std::vector<size_t> all = allNumbers(devices);
  std::vector<std::vector<Value*>> out(devices, std::vector<Value*>(k));
  if (groups <= 1) {
    auto ar = insert.add(last, allReduceSpec(std::move(operands), k, bucket, m.devices(), all));
    if (!ar.ok()) return ar.status();
    for (size_t d = 0; d < devices; ++d)
      for (size_t i = 0; i < k; ++i) out[d][i] = (*ar)->result(d * k + i);
    return out;
  }
  const size_t per_group = devices / static_cast<size_t>(groups);
  // 1. Within each group: every member gets its group's sum.
  auto local = insert.add(
      last, allReduceSpec(std::move(operands), k, bucket, m.devices(), all, "group", groups));
  if (!local.ok()) return local.status();
  // 2. Across the groups, among their first devices.
  std::vector<Value*> leader_sums;
  std::vector<ir::Device> leaders;
  std::vector<size_t> leader_numbers;
  for (size_t d = 0; d < devices; d += per_group) {
    for (size_t i = 0; i < k; ++i) leader_sums.push_back((*local)->result(d * k + i));
    leaders.push_back(m.devices()[d]);
    leader_numbers.push_back(d);
  }
  auto cross =
      insert.add(last, allReduceSpec(leader_sums, k, bucket, leaders, leader_numbers, "cross"));
  if (!cross.ok()) return cross.status();
  // 3. Back within each group, from its first device.
  std::vector<Value*> sources;
  for (size_t r = 0; r < (*cross)->numResults(); ++r) sources.push_back((*cross)->result(r));
  std::vector<std::string> names;
  for (size_t d = 0; d < devices; ++d)
    for (size_t i = 0; i < k; ++i) names.push_back(tagReplica(grads[d][i]->name(), d, "sum"));
  auto shared = insert.add(
      last,
      ir::BroadcastArgs{.xs = std::move(sources), .devices = m.devices(), .groups = groups}.spec(
          {.names = std::move(names)}));
  if (!shared.ok()) return shared.status();
  for (size_t d = 0; d < devices; ++d)
    for (size_t i = 0; i < k; ++i) out[d][i] = (*shared)->result(d * k + i);
  return out;
}

/// Per variable, the node on each device that `varOf` says acts on it (an optimizer update:
/// its weight's; batch_norm_apply: its running mean's; nullopt: not a node of interest),
/// the variables in the order they first appear. A device without one is the error
/// `missing(var, device)` gives.
struct PerVariable {
  absl::flat_hash_map<std::string, std::vector<Node*>> nodes;  // var -> node by device
  std::vector<std::string> order;
};
template <typename VarOf, typename Missing>
absl::StatusOr<PerVariable> nodesPerVariable(const ir::Module& m, const ir::Graph& g, VarOf varOf,
                                             Missing missing) {
  const size_t devices = m.devices().size();
  PerVariable out;
  for (const auto& n : g.nodes()) {
    std::optional<std::string> var = varOf(*n);
    if (!var) continue;
    auto [it, inserted] = out.nodes.try_emplace(*var, devices, nullptr);
    if (inserted) out.order.push_back(*var);
    size_t d = n->device() ? m.deviceIndex(*n->device()).value_or(SIZE_MAX) : SIZE_MAX;
    if (d == SIZE_MAX)
      return absl::FailedPreconditionError(
          absl::StrCat("insert-collectives: ", n->describe(), " is not on a module device"));
    it->second[d] = n.get();
  }
  for (const std::string& var : out.order)
    for (size_t d = 0; d < devices; ++d)
      if (out.nodes[var][d] == nullptr) return missing(var, d);
  return out;
}

/// The gradient an optimizer update (single form) reads, and setting it.
Value* gradientOf(const Node& update) { return ir::UpdateView::of(update)->grad(0); }
void setGradient(Node& update, Value* g) {
  update.setOperand(ir::UpdateView::of(update)->gradOperand(0), g);
}

/// Gradient all_reduce in buckets, each right after the last gradient it carries.
absl::Status bucketGradients(ir::Module& m, ir::Graph& g, int64_t first_cap, int64_t cap,
                             int64_t groups, ir::DType wire, int64_t* next_bucket) {
  size_t devices = m.devices().size();
  // var -> the optimizer update of each device (the single-parameter form: grouping comes
  // later, group-updates).
  auto updated = [](const Node& n) -> std::optional<std::string> {
    std::optional<ir::UpdateView> u = ir::UpdateView::of(n);
    if (!u || u->grouped() || !ir::ParamView::is(*u->param(0)->def())) return std::nullopt;
    return ir::ParamView(*u->param(0)->def()).var();
  };
  ASSIGN_OR_RETURN(PerVariable per_var,
                   nodesPerVariable(m, g, updated, [&](const std::string& var, size_t d) {
                     return absl::FailedPreconditionError(absl::StrCat(
                         "insert-collectives: @", var, " is updated on ",
                         ir::toString(m.devices()[0]), " but not on ", ir::toString(m.devices()[d])));
                   }));
  auto& updates = per_var.nodes;
  auto pos = g.positions();
  struct Entry {
    size_t ready;  // position of the first device's gradient
    std::string var;
  };
  std::vector<Entry> entries;
  for (const std::string& var : per_var.order)
    entries.push_back({pos.at(gradientOf(*updates[var][0])->def()), var});
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.ready < b.ready; });

  Insertions insert(g);
  std::vector<const Entry*> bucket;
  int64_t bytes = 0;
  auto flush = [&]() -> absl::Status {
    if (bucket.empty()) return absl::OkStatus();
    std::vector<std::vector<Value*>> grads(devices);
    size_t last = 0;
    for (size_t d = 0; d < devices; ++d)
      for (const Entry* e : bucket) {
        Value* grad = gradientOf(*updates[e->var][d]);
        const size_t at = pos.at(grad->def());
        if (const Node* def = grad->def();
            ir::CastView::is(*def) && ir::CastView(*def).x()->type().dtype == wire) {
          // Cast up from the wire dtype (a bf16 linear weight gradient): reduce the value
          // before the cast, which casting back would give exactly.
          grad = ir::CastView(*def).x();
        } else if (grad->type().dtype != wire) {
          // Cast right where the gradient is made: one pass over it, on its device.
          ASSIGN_OR_RETURN(
              Node * cast,
              insert.add(
                  at,
                  ir::CastArgs{.x = grad, .dtype = *ir::parseCastType(ir::dtypeName(wire))}.spec(
                      {.device = grad->def()->device(),
                       .names = {tagReplica(grad->name(), d, ir::dtypeName(wire))},
                       .scope = grad->def()->scope()})));
          grad = cast->result();
        }
        grads[d].push_back(grad);
        last = std::max(last, at);
      }
    auto reduced = reduceBucket(m, insert, last, grads, (*next_bucket)++, groups);
    if (!reduced.ok()) return reduced.status();
    for (size_t d = 0; d < devices; ++d)
      for (size_t i = 0; i < bucket.size(); ++i)
        setGradient(*updates[bucket[i]->var][d], (*reduced)[d][i]);
    bucket.clear();
    bytes = 0;
    return absl::OkStatus();
  };
  for (const Entry& e : entries) {
    bucket.push_back(&e);
    bytes += gradientOf(*updates[e.var][0])->type().numElements() * ir::dtypeBytes(wire);
    if (bytes >= (*next_bucket == 0 ? first_cap : cap)) RETURN_IF_ERROR(flush());
  }
  RETURN_IF_ERROR(flush());
  insert.apply();
  return absl::OkStatus();
}

/// Sync batch norm: the statistics every device's conv2d_stats gives, and the sums every
/// batch_norm_backward_reduce gives, are all-reduced (one collective per layer and
/// direction, right after the last device's producer), so that each device normalizes
/// with, and differentiates through, the global batch statistics. Running statistics then
/// stay identical on every device. The parameters' own gradients (dgamma, dbeta) stay
/// local: the gradient buckets reduce them once, as every gradient.
absl::Status syncBatchNorm(ir::Module& m, ir::Graph& g, int64_t* next_bucket) {
  const size_t devices = m.devices().size();
  for (const auto& n : g.nodes())
    if (ir::BatchNormView::is(*n) && ir::BatchNormView(*n).training())
      return absl::FailedPreconditionError(absl::StrCat(
          "insert-collectives{sync-bn}: ", n->describe(),
          " computes its batch statistics inside; sync batch norm all-reduces them between "
          "conv2d_stats and batch_norm_apply, so run fuse-conv-bn-relu before "
          "insert-collectives{sync-bn}"));
  // Per batch-norm layer (its running mean's variable), each device's apply node.
  ASSIGN_OR_RETURN(
      PerVariable per_layer,
      nodesPerVariable(
          m, g,
          [](const Node& n) -> std::optional<std::string> {
            if (!ir::BatchNormApplyView::is(n)) return std::nullopt;
            const Node* def = ir::BatchNormApplyView(n).running_mean()->def();
            if (def == nullptr || !ir::ParamView::is(*def)) return std::nullopt;
            return ir::ParamView(*def).var();
          },
          [&](const std::string& var, size_t d) {
            return absl::FailedPreconditionError(absl::StrCat(
                "insert-collectives{sync-bn}: the batch norm of @", var, " runs on ",
                ir::toString(m.devices()[0]), " but not on ", ir::toString(m.devices()[d])));
          }));
  const std::vector<std::string>& order = per_layer.order;
  if (order.empty()) return absl::OkStatus();
  auto& applies = per_layer.nodes;
  absl::flat_hash_map<const Node*, std::pair<std::string, size_t>> layer_of;  // apply -> (layer, d)
  for (const std::string& var : order)
    for (size_t d = 0; d < devices; ++d) layer_of[applies[var][d]] = {var, d};
  auto pos = g.positions();
  Insertions insert(g);
  // Reduces one value per device (by_device[d]), placed after the last producer; returns
  // the node whose result d is device d's reduced value.
  auto reduceAcross = [&](const std::vector<Value*>& by_device) -> absl::StatusOr<Node*> {
    size_t last = 0;
    for (Value* v : by_device) last = std::max(last, pos.at(v->def()));
    return insert.add(last, allReduceSpec(by_device, 1, (*next_bucket)++, m.devices(),
                                          allNumbers(devices)));
  };
  absl::flat_hash_map<std::string, Node*> reduced_stats;
  for (const std::string& var : order) {
    const auto& per = applies[var];
    std::vector<Value*> stats;
    for (size_t d = 0; d < devices; ++d) stats.push_back(ir::BatchNormApplyView(*per[d]).stats());
    ASSIGN_OR_RETURN(Node * ar, reduceAcross(stats));
    for (size_t d = 0; d < devices; ++d)
      per[d]->setOperand(ir::BatchNormApplyView::kStats, ar->result(d));
    reduced_stats[var] = ar;
  }
  // Backward: the sums of each layer's reduce nodes; apply nodes read the reduced sums and
  // the reduced statistics (for the global count).
  absl::flat_hash_map<std::string, std::vector<Node*>> reduces;
  for (const auto& n : g.nodes()) {
    if (!ir::BatchNormBackwardReduceView::is(*n)) continue;
    // save_mean comes from the apply
    auto it = layer_of.find(ir::BatchNormBackwardReduceView(*n).save_mean()->def());
    if (it == layer_of.end()) continue;
    auto& per = reduces.try_emplace(it->second.first, devices, nullptr).first->second;
    per[it->second.second] = n.get();
  }
  absl::flat_hash_map<const Value*, Value*> reduced_sums;
  for (const std::string& var : order) {
    auto it = reduces.find(var);
    if (it == reduces.end()) continue;
    std::vector<Value*> sums;
    for (Node* r : it->second) {
      if (r == nullptr)
        return absl::FailedPreconditionError(absl::StrCat(
            "insert-collectives{sync-bn}: the backward of @", var, " is missing on a device"));
      sums.push_back(ir::BatchNormBackwardReduceView(*r).sums());
    }
    ASSIGN_OR_RETURN(Node * ar, reduceAcross(sums));
    for (size_t d = 0; d < devices; ++d) reduced_sums[sums[d]] = ar->result(d);
  }
  for (const auto& n : g.nodes()) {
    if (!ir::BatchNormBackwardApplyView::is(*n)) continue;
    const ir::BatchNormBackwardApplyView apply(*n);
    if (auto it = reduced_sums.find(apply.sums()); it != reduced_sums.end())
      n->setOperand(apply.kSums, it->second);
    auto layer = layer_of.find(apply.save_mean()->def());  // save_mean comes from the apply
    if (layer != layer_of.end())
      n->setOperand(apply.kStats, reduced_stats[layer->second.first]->result(layer->second.second));
  }
  insert.apply();
  return absl::OkStatus();
}

/// Values of ops with the device_sum trait (target_weight_sum: the count a mean with
/// ignored targets divides by) all-reduced right after the last device computes its
/// share, and every reader given the sum: each device's loss then divides by the global
/// count, and the per-device losses add up to the global mean on any split. The graph's
/// outputs keep the device's own share, which sumOutputs adds up once.
absl::Status sumDeviceSums(ir::Module& m, ir::Graph& g, int64_t* next_bucket) {
  const size_t devices = m.devices().size();
  absl::flat_hash_map<std::string, std::vector<Node*>> per_base;  // base name -> by device
  std::vector<std::string> order;
  for (const auto& n : g.nodes()) {
    if (!n->info().has(ir::kDeviceSum)) continue;
    const size_t d = n->device() ? m.deviceIndex(*n->device()).value_or(SIZE_MAX) : SIZE_MAX;
    if (d == SIZE_MAX || n->numResults() != 1)
      return absl::FailedPreconditionError(
          absl::StrCat("insert-collectives: ", n->describe(), " is not on a module device"));
    const std::string base = stripReplica(n->result()->name(), d);
    auto [it, inserted] = per_base.try_emplace(base, devices, nullptr);
    if (inserted) order.push_back(base);
    it->second[d] = n.get();
  }
  if (order.empty()) return absl::OkStatus();
  auto pos = g.positions();
  Insertions insert(g);
  absl::flat_hash_map<const Value*, Value*> replace;
  absl::flat_hash_map<const Node*, bool> sums;
  for (const std::string& base : order) {
    std::vector<Value*> operands;
    size_t last = 0;
    for (size_t d = 0; d < devices; ++d) {
      const Node* n = per_base[base][d];
      if (n == nullptr)
        return absl::FailedPreconditionError(absl::StrCat(
            "insert-collectives: %", base, " (summed over the devices) is computed on ",
            ir::toString(m.devices()[0]), " but not on ", ir::toString(m.devices()[d])));
      operands.push_back(n->result());
      last = std::max(last, pos.at(n));
    }
    ASSIGN_OR_RETURN(Node * ar, insert.add(last, allReduceSpec(operands, 1, (*next_bucket)++,
                                                               m.devices(), allNumbers(devices))));
    sums[ar] = true;
    for (size_t d = 0; d < devices; ++d) replace[operands[d]] = ar->result(d);
  }
  for (const auto& n : g.nodes())
    if (!sums.contains(n.get()))
      for (size_t i = 0; i < n->numOperands(); ++i)
        if (auto it = replace.find(n->operand(i)); it != replace.end())
          n->setOperand(i, it->second);
  insert.apply();
  return absl::OkStatus();
}

/// The step's returned values (device-major after replicate) summed across devices; the
/// first device's sums become the graph's outputs.
absl::Status sumOutputs(ir::Module& m, ir::Graph& g, int64_t* next_bucket) {
  size_t devices = m.devices().size();
  const auto& outs = g.outputs();
  if (outs.size() % devices != 0)
    return absl::FailedPreconditionError(
        absl::StrCat("insert-collectives: @", g.name(), " returns ", outs.size(),
                     " values, not a multiple of ", devices, " devices"));
  size_t k = outs.size() / devices;
  std::vector<Value*> result;
  for (size_t j = 0; j < k; ++j) {
    std::vector<Value*> operands;
    for (size_t d = 0; d < devices; ++d) operands.push_back(outs[d * k + j]);
    auto ar = g.create(
        allReduceSpec(std::move(operands), 1, (*next_bucket)++, m.devices(), allNumbers(devices)));
    if (!ar.ok()) return ar.status();
    result.push_back((*ar)->result(0));
  }
  g.setOutputs(std::move(result));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> InsertCollectives::run(ir::Module& m) {
  if (!m.isReplicated())
    return absl::FailedPreconditionError(
        "insert-collectives: the module is not replicated (run replicate first)");
  const int64_t devices = static_cast<int64_t>(m.devices().size());
  if (groups_ > 1 && (devices % groups_ != 0 || groups_ >= devices))
    return absl::FailedPreconditionError(
        absl::StrCat("insert-collectives: groups=", groups_, " does not cut the ", devices,
                     " devices into equal groups of two or more (use a divisor of ", devices, ")"));
  bool several = m.devices().size() > 1;
  for (const auto& g : m.graphs()) {
    for (const auto& n : g->nodes())
      if (n->info().has(ir::kCollective))
        return absl::FailedPreconditionError(absl::StrCat(
            "insert-collectives: @", g->name(), " already has collectives (", n->describe(), ")"));
    RETURN_IF_ERROR(splitInputs(m, *g));
    if (!several) continue;
    int64_t bucket = 0;
    if (g->name() == ir::kInitGraph) {
      RETURN_IF_ERROR(broadcastInit(m, *g));
      continue;
    }
    RETURN_IF_ERROR(
        bucketGradients(m, *g, first_bucket_bytes_, bucket_bytes_, groups_, wire_, &bucket));
    RETURN_IF_ERROR(sumDeviceSums(m, *g, &bucket));
    // A prediction's outputs are per example: each device keeps its rows, which the
    // runtime gathers in device order; summing them would add different examples.
    if (g->name() != ir::kPredictGraph) RETURN_IF_ERROR(sumOutputs(m, *g, &bucket));
    if (sync_bn_ && g->name() == ir::kTrainGraph) RETURN_IF_ERROR(syncBatchNorm(m, *g, &bucket));
  }
  return true;
}

std::string InsertCollectives::optionsText() const {
  return absl::StrCat(
      "{bucket-mb=", ir::formatDouble(static_cast<double>(bucket_bytes_) / (1 << 20)),
      ",first-bucket-mb=", ir::formatDouble(static_cast<double>(first_bucket_bytes_) / (1 << 20)),
      groups_ > 1 ? absl::StrCat(",groups=", groups_) : "", sync_bn_ ? ",sync-bn=true" : "",
      wire_ != ir::DType::kF32 ? absl::StrCat(",allreduce-dtype=", ir::dtypeName(wire_)) : "",
      "}");
}

absl::StatusOr<std::unique_ptr<Pass>> InsertCollectives::create(PassOptions& opts) {
  auto cap = opts.getDouble("bucket-mb", 25);
  auto first = opts.getDouble("first-bucket-mb", 1);
  auto groups = opts.getInt("groups", 1);
  auto sync_bn = opts.getString("sync-bn", "false");
  if (!sync_bn.ok()) return sync_bn.status();
  if (*sync_bn != "true" && *sync_bn != "false")
    return absl::InvalidArgumentError(absl::StrCat(
        "pass insert-collectives: option 'sync-bn' must be true or false, got '", *sync_bn, "'"));
  ASSIGN_OR_RETURN(std::string wire, opts.getString("allreduce-dtype", "f32"));
  if (wire != "f32" && wire != "bf16")
    return absl::InvalidArgumentError(absl::StrCat(
        "pass insert-collectives: option 'allreduce-dtype' must be f32 or bf16, got '", wire, "'"));
  if (!cap.ok()) return cap.status();
  if (!first.ok()) return first.status();
  if (!groups.ok()) return groups.status();
  if (*groups < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("pass insert-collectives: option 'groups' must be >= 1, got ", *groups));
  RETURN_IF_ERROR(opts.finish());
  // The upper bound (a petabyte) keeps the byte counts far inside int64.
  constexpr double kMaxMb = 1e9;
  for (auto [name, value] : {std::pair{"bucket-mb", *cap}, std::pair{"first-bucket-mb", *first}})
    if (!(value > 0 && value <= kMaxMb))
      return absl::InvalidArgumentError(absl::StrCat("pass insert-collectives: option '", name,
                                                     "' must be > 0 and at most 1e9 MiB, got ",
                                                     ir::formatDouble(value)));
  return std::unique_ptr<Pass>(new InsertCollectives(
      *cap, *first, *groups, *sync_bn == "true", wire == "bf16" ? ir::DType::kBF16 : ir::DType::kF32));
}

}  // namespace tandem::passes
