#include "tools/tandem/explore/page_data.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/dot_views.h"
#include "ir/interfaces.h"
#include "ir/op_cost.h"
#include "ir/placement.h"
#include "ir/plan.h"
#include "ir/printer.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "nlohmann/json.hpp"
#include "passes/plan_memory.h"
#include "sim/cost_model.h"
#include "sim/gpu_specs.h"
#include "sim/roofline.h"
#include "tools/tandem/explore/assets.h"

namespace tandem::tools::explore {
namespace {

using nlohmann::json;

// Strings many nodes share (op names, layer paths, locations) go into a table once; nodes
// hold indices.
class Interned {
 public:
  int operator()(const std::string& s) {
    auto [it, added] = index_.try_emplace(s, static_cast<int>(list_.size()));
    if (added) list_.push_back(s);
    return it->second;
  }
  json table() const { return list_; }

 private:
  absl::flat_hash_map<std::string, int> index_;
  std::vector<std::string> list_;
};

// The cost model's figure for one device's share, on the GPU `tandem simulate` assumes by
// default (an H100, NVLink within a node, InfiniBand beyond): compute by the roofline,
// collectives by the alpha-beta models over their devices.
struct CostModel {
  sim::GpuSpec gpu;
  sim::Topology topo;

  static absl::StatusOr<CostModel> make() {
    CostModel c;
    ASSIGN_OR_RETURN(c.gpu, sim::gpuByName("h100"));
    ASSIGN_OR_RETURN(c.topo.intra, sim::linkByName("nvlink", c.gpu));
    ASSIGN_OR_RETURN(c.topo.inter, sim::linkByName("ib", c.gpu));
    return c;
  }
  double seconds(const ir::Node& n) const {
    if (!ir::CollectiveView::is(n)) return sim::rooflineSeconds(sim::nodeWork(n), gpu);
    const ir::CollectiveView c(n);
    const auto p = static_cast<int64_t>(c.devices().size() / std::max<int64_t>(c.numGroups(), 1));
    return sim::collectiveSeconds(n, p, topo);
  }
};

// An estimate to four significant digits: the model is no more exact, and 17 digits of
// each would be a tenth of a big page.
double fourDigits(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

const char* kindName(ir::CollectiveKind k) {
  switch (k) {
    case ir::CollectiveKind::kReduce:
      return "reduce";
    case ir::CollectiveKind::kBroadcast:
      return "broadcast";
    case ir::CollectiveKind::kScatter:
      return "scatter";
    case ir::CollectiveKind::kGather:
      return "gather";
    case ir::CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case ir::CollectiveKind::kAllGather:
      return "all_gather";
  }
  return "";
}

// The variables behind value `v`: a param read's, or those of the values it was computed
// from (a sharded update's packed weights: concat of slices of reshaped params), a few
// steps back at most.
void variablesBehind(const ir::Value& v, std::set<std::string>& out) {
  std::deque<const ir::Node*> queue{v.def()};
  absl::flat_hash_set<const ir::Node*> seen;
  while (!queue.empty() && seen.size() < 64) {
    const ir::Node* n = queue.front();
    queue.pop_front();
    if (n == nullptr || !seen.insert(n).second) continue;
    if (n->op() == ir::Op::kParam) {
      if (const std::string* var = ir::variableOf(*n)) out.insert(*var);
      continue;
    }
    for (const ir::Value* o : n->operands()) queue.push_back(o->def());
  }
}

// What may stand between a gradient bucket's collective and the updates that read its
// sums: the other collectives of a hierarchical or sharded reduction, casts, the global
// norm's clipping, and the packing of a sharded bucket. (Not a batch norm: sync batch
// norm's statistics all_reduce feeds one, and serves no parameter.)
bool passesGradients(const ir::Node& n) {
  switch (n.op()) {
    case ir::Op::kCast:
    case ir::Op::kClipGradNorm:
    case ir::Op::kReshape:
    case ir::Op::kConcatAxis:
    case ir::Op::kSliceAxis:
      return true;
    default:
      return ir::CollectiveView::is(n);
  }
}

// The parameters a gradient bucket's collective serves: those of the optimizer updates
// that read its sums as a gradient, by variable name.
std::vector<std::string> bucketParameters(
    const ir::Node& c, const absl::flat_hash_map<const ir::Value*, std::vector<ir::Node*>>& users) {
  std::set<std::string> vars;
  std::deque<const ir::Node*> queue{&c};
  absl::flat_hash_set<const ir::Node*> seen;
  while (!queue.empty()) {
    const ir::Node* n = queue.front();
    queue.pop_front();
    if (!seen.insert(n).second) continue;
    for (size_t r = 0; r < n->numResults(); ++r) {
      auto it = users.find(n->result(r));
      if (it == users.end()) continue;
      for (const ir::Node* user : it->second) {
        if (const std::optional<ir::UpdateView> u = ir::UpdateView::of(*user)) {
          for (size_t j = 0; j < u->numParams(); ++j)
            if (u->grad(j) == n->result(r)) variablesBehind(*u->param(j), vars);
        } else if (passesGradients(*user)) {
          queue.push_back(user);
        }
      }
    }
  }
  return {vars.begin(), vars.end()};
}

// Live bytes per position of one device's buffers: the position of the first peak, and
// the peak.
std::pair<int64_t, int64_t> peakOf(const std::vector<const passes::ArenaBuffer*>& buffers,
                                   int64_t positions) {
  std::vector<int64_t> delta(static_cast<size_t>(positions) + 2, 0);
  for (const passes::ArenaBuffer* b : buffers) {
    delta[static_cast<size_t>(b->first)] += b->bytes;
    delta[static_cast<size_t>(b->last) + 1] -= b->bytes;
  }
  int64_t live = 0, peak = 0, at = 0;
  for (int64_t p = 0; p <= positions; ++p) {
    live += delta[static_cast<size_t>(p)];
    if (live > peak) {
      peak = live;
      at = p;
    }
  }
  return {at, peak};
}

json memoryData(const ir::Module& m, const ir::Graph& g, const std::vector<int64_t>& pos,
                const std::vector<passes::ArenaBuffer>& buffers) {
  const ir::GraphPlan& plan = *g.plan();
  const size_t devices = plan.arenas.size();
  std::vector<std::vector<const passes::ArenaBuffer*>> of(devices);
  for (const passes::ArenaBuffer& b : buffers)
    if (b.device < devices) of[b.device].push_back(&b);
  const auto positions = static_cast<int64_t>(g.numNodes());
  json out = json::array();
  for (size_t d = 0; d < devices; ++d) {
    auto [at, peak] = peakOf(of[d], positions);
    // Flat rows: node position, result (-1: the node's workspace), first, last, offset,
    // bytes.
    json rows = json::array();
    std::vector<size_t> at_peak;
    for (size_t i = 0; i < of[d].size(); ++i) {
      const passes::ArenaBuffer& b = *of[d][i];
      for (int64_t x : {pos[b.node->id()], b.result ? static_cast<int64_t>(*b.result) : -1, b.first,
                        b.last, b.offset, b.bytes})
        rows.push_back(x);
      if (b.first <= at && at <= b.last) at_peak.push_back(i);
    }
    // What makes the peak: the buffers live there, largest first.
    std::stable_sort(at_peak.begin(), at_peak.end(),
                     [&](size_t a, size_t b) { return of[d][a]->bytes > of[d][b]->bytes; });
    out.push_back({{"device", m.isReplicated() ? ir::toString(m.devices()[d]) : "-"},
                   {"arena", plan.arenas[d].bytes},
                   {"live_peak", plan.arenas[d].live_peak_bytes},
                   {"unshared", plan.arenas[d].unshared_bytes},
                   {"peak_at", at},
                   {"peak_bytes", peak},
                   {"peak_buffers", at_peak},
                   {"buffers", std::move(rows)}});
  }
  return out;
}

json traceData(const std::vector<runtime::TraceSpan>& spans, const std::vector<int64_t>& pos,
               size_t devices) {
  json flat = json::array();
  int64_t steps = 0;
  std::vector<double> compute(devices, 0), comm(devices, 0), exposed(devices, 0);
  double first = 0, last = 0;
  bool any = false;
  for (const runtime::TraceSpan& s : spans) {
    flat.push_back(pos[s.node->id()]);
    flat.push_back(s.device);
    flat.push_back(s.stream);
    flat.push_back(s.step);
    flat.push_back(s.start_us);
    flat.push_back(s.dur_us);
    steps = std::max(steps, s.step + 1);
    if (s.stream == 0) compute[s.device] += s.dur_us;
    if (s.stream == 1) comm[s.device] += s.dur_us;
    if (s.stream != 2) {
      first = any ? std::min(first, s.start_us) : s.start_us;
      last = any ? std::max(last, s.start_us + s.dur_us) : s.start_us + s.dur_us;
      any = true;
    }
  }
  json exposed_flat = json::array();
  for (const ExposedSpan& e : exposedCommunication(spans, devices)) {
    exposed_flat.push_back(e.device);
    exposed_flat.push_back(e.start_us);
    exposed_flat.push_back(e.end_us);
    exposed[e.device] += e.end_us - e.start_us;
  }
  json per_device = json::array();
  for (size_t d = 0; d < devices; ++d)
    per_device.push_back(
        {{"compute_us", compute[d]}, {"comm_us", comm[d]}, {"exposed_us", exposed[d]}});
  return {{"steps", steps},
          {"span_us", last - first},
          {"spans", std::move(flat)},
          {"exposed", std::move(exposed_flat)},
          {"per_device", std::move(per_device)}};
}

}  // namespace

std::vector<ExposedSpan> exposedCommunication(const std::vector<runtime::TraceSpan>& spans,
                                              size_t devices) {
  std::vector<std::vector<std::pair<double, double>>> compute(devices), comm(devices);
  for (const runtime::TraceSpan& s : spans) {
    if (s.device >= devices || s.stream == 2) continue;
    (s.stream == 0 ? compute : comm)[s.device].emplace_back(s.start_us, s.start_us + s.dur_us);
  }
  std::vector<ExposedSpan> out;
  for (size_t d = 0; d < devices; ++d) {
    // The compute stream's busy time as disjoint intervals, then each comm slice less them.
    std::sort(compute[d].begin(), compute[d].end());
    std::vector<std::pair<double, double>> busy;
    for (const auto& [a, b] : compute[d]) {
      if (!busy.empty() && a <= busy.back().second) {
        busy.back().second = std::max(busy.back().second, b);
      } else {
        busy.emplace_back(a, b);
      }
    }
    std::sort(comm[d].begin(), comm[d].end());
    std::vector<ExposedSpan> mine;
    for (const auto& [a, b] : comm[d]) {
      double at = a;
      auto it = std::lower_bound(busy.begin(), busy.end(), std::make_pair(a, a),
                                 [](const auto& x, const auto& y) { return x.second < y.first; });
      for (; it != busy.end() && it->first < b && at < b; ++it) {
        if (it->first > at) mine.push_back({d, at, std::min(it->first, b)});
        at = std::max(at, it->second);
      }
      if (at < b) mine.push_back({d, at, b});
    }
    // Comm slices may overlap one another (they do not on one stream, but a trace is
    // input): merge what touches.
    for (const ExposedSpan& e : mine) {
      if (!out.empty() && out.back().device == d && e.start_us <= out.back().end_us) {
        out.back().end_us = std::max(out.back().end_us, e.end_us);
      } else {
        out.push_back(e);
      }
    }
  }
  return out;
}

absl::StatusOr<std::string> pageData(const PageInputs& in) {
  const ir::Module& m = *in.module;
  const ir::Graph& g = *in.graph;
  const ir::GraphPlan* plan = g.plan();
  const bool has_streams = plan != nullptr && plan->has(ir::PlanPart::kStreams);
  const bool has_layouts = plan != nullptr && plan->has(ir::PlanPart::kLayouts);
  const bool has_algorithms = plan != nullptr && plan->has(ir::PlanPart::kAlgorithms);
  const bool has_memory = plan != nullptr && plan->has(ir::PlanPart::kMemory);
  ASSIGN_OR_RETURN(CostModel cost, CostModel::make());

  std::vector<int64_t> pos(g.idBound(), -1);
  for (size_t i = 0; i < g.numNodes(); ++i) pos[g.nodes()[i]->id()] = static_cast<int64_t>(i);
  const std::vector<std::string> paths = ir::layerPaths(g);
  const std::vector<ir::StepPhase> phases = ir::stepPhases(g);
  const auto users = g.users();
  ir::DeviceIndexCache device_index(m);
  auto deviceOf = [&](const ir::Value& v) -> int64_t {
    if (!m.isReplicated()) return v.def()->device() || ir::CollectiveView::is(*v.def()) ? 0 : -1;
    if (!v.device() && !ir::CollectiveView::is(*v.def())) return -1;  // a host input
    const std::optional<size_t> d = device_index(ir::deviceOfValue(v));
    return d ? static_cast<int64_t>(*d) : -1;
  };

  Interned ops, path_table, scopes, locations, types, attributes, layouts;
  json name = json::array(), op = json::array(), path = json::array(), scope = json::array(),
       phase = json::array(), device = json::array(), stream = json::array(),
       location = json::array(), attrs = json::array(), bytes = json::array(),
       flops = json::array(), estimate_us = json::array(), operands = json::array(),
       results = json::array();
  json collectives = json::object(), workspaces = json::object(), waits = json::object(),
       algorithms = json::object();
  for (const auto& np : g.nodes()) {
    const ir::Node& n = *np;
    name.push_back(n.numResults() > 0    ? n.result(0)->name()
                   : n.numOperands() > 0 ? absl::StrCat(n.opName(), "(%", n.operand(0)->name(), ")")
                                         : std::string(n.opName()));
    op.push_back(ops(std::string(n.opName())));
    path.push_back(path_table(paths[n.id()]));
    scope.push_back(scopes(n.scope()));
    phase.push_back(static_cast<int>(phases[n.id()]));
    int64_t dev = -1;
    if (n.device()) {
      const std::optional<size_t> d = m.isReplicated() ? device_index(*n.device()) : 0;
      dev = d ? static_cast<int64_t>(*d) : -1;
    }
    device.push_back(dev);
    const ir::NodePlan* p = plan != nullptr && n.id() < plan->nodes.size() ? &plan->of(n) : nullptr;
    stream.push_back(has_streams && p->stream ? static_cast<int>(*p->stream) : -1);
    location.push_back(locations(n.location()));
    // The printer's own text of the attributes (the rest of a node's line is in the
    // fields here): replicas share it, so it is kept once.
    attrs.push_back(attributes(ir::printAttributes(n)));
    const ir::OpWork work = ir::opWork(n);
    flops.push_back(std::round(work.flops));
    estimate_us.push_back(fourDigits(cost.seconds(n) * 1e6));
    // Operands as (node position, result index): names and types are the producer's.
    json ins = json::array();
    for (const ir::Value* v : n.operands()) {
      ins.push_back(pos[v->def()->id()]);
      ins.push_back(v->index());
    }
    operands.push_back(std::move(ins));
    // Results: name, type, layout (both indices into their tables), arena offset (-1:
    // none), device (-1: the host's).
    json outs = json::array();
    int64_t result_bytes = 0;
    for (size_t r = 0; r < n.numResults(); ++r) {
      const ir::Value& v = *n.result(r);
      // The first result's name is the node's (null here: a third of a big page).
      outs.push_back(json::array(
          {r == 0 ? json() : json(v.name()), types(ir::toString(v.type())),
           layouts(has_layouts ? std::string(ir::layoutName(plan->layout(v))) : "plain"),
           has_memory ? plan->offset(v) : ir::GraphPlan::kNoOffset, deviceOf(v)}));
      result_bytes += v.type().bytes();
    }
    results.push_back(std::move(outs));
    if (ir::CollectiveView::is(n)) {
      const ir::CollectiveView c(n);
      json devs = json::array();
      for (const ir::Device& d : c.devices())
        devs.push_back(m.isReplicated() ? static_cast<int64_t>(device_index(d).value_or(0)) : 0);
      const size_t shares = std::max<size_t>(c.devices().size(), 1);
      const int64_t per_device = static_cast<int64_t>(sim::collectiveBytesPerDevice(n));
      bytes.push_back(per_device);
      json info = {{"kind", kindName(c.kind())},     {"devices", std::move(devs)},
                   {"groups", c.numGroups()},        {"tensors", n.numResults() / shares},
                   {"bytes_per_device", per_device}, {"describe", ir::describeWork(n)}};
      if (const std::optional<int64_t> b = c.bucket()) {
        info["bucket"] = *b;
        info["parameters"] = bucketParameters(n, users);
      }
      collectives[std::to_string(pos[n.id()])] = std::move(info);
    } else {
      bytes.push_back(result_bytes);
    }
    if (p != nullptr && p->workspace)
      workspaces[std::to_string(pos[n.id()])] = {p->workspace->offset, p->workspace->bytes};
    if (has_algorithms && p != nullptr && !p->algorithm.empty())
      algorithms[std::to_string(pos[n.id()])] = p->algorithm;
  }
  if (plan != nullptr && plan->has(ir::PlanPart::kEvents) && m.isReplicated())
    for (const ir::StreamWait& w : ir::streamWaits(m, g)) {
      json& list = waits[std::to_string(pos[w.consumer->id()])];
      if (list.is_null()) list = json::array();
      list.push_back(
          json::array({pos[w.producer->id()], ir::slotName(m, w.at), ir::slotName(m, w.from)}));
    }

  json devices = json::array();
  for (const ir::Device& d : m.devices()) devices.push_back(ir::toString(d));
  json doc = {{"format", kPageDataFormat},
              {"module", m.name()},
              {"graph", g.name()},
              {"source", in.source},
              {"devices", std::move(devices)},
              {"plan",
               {{"streams", has_streams},
                {"layouts", has_layouts},
                {"algorithms", has_algorithms},
                {"memory", has_memory}}},
              {"cost_model",
               "roofline of an h100; collectives ring or tree over nvlink within 8 GPUs, ib "
               "beyond (tandem simulate's defaults)"},
              {"ops", ops.table()},
              {"paths", path_table.table()},
              {"scopes", scopes.table()},
              {"locations", locations.table()},
              {"types", types.table()},
              {"attributes", attributes.table()},
              {"layouts", layouts.table()},
              {"nodes",
               {{"name", std::move(name)},
                {"op", std::move(op)},
                {"path", std::move(path)},
                {"scope", std::move(scope)},
                {"phase", std::move(phase)},
                {"device", std::move(device)},
                {"stream", std::move(stream)},
                {"location", std::move(location)},
                {"attrs", std::move(attrs)},
                {"bytes", std::move(bytes)},
                {"flops", std::move(flops)},
                {"estimate_us", std::move(estimate_us)},
                {"operands", std::move(operands)},
                {"results", std::move(results)}}},
              {"collectives", std::move(collectives)},
              {"workspaces", std::move(workspaces)},
              {"algorithms", std::move(algorithms)},
              {"waits", std::move(waits)}};
  if (has_memory) {
    ASSIGN_OR_RETURN(std::vector<passes::ArenaBuffer> buffers, passes::arenaBuffers(m, g));
    doc["memory"] = memoryData(m, g, pos, buffers);
  }
  if (!in.spans.empty())
    doc["trace"] = traceData(in.spans, pos, std::max<size_t>(m.devices().size(), 1));
  if (!in.metrics.empty()) {
    json rows = json::array();
    for (const EpochPoint& e : in.metrics)
      rows.push_back(json::array({e.epoch, e.train_loss, e.train_acc, e.test_acc}));
    doc["metrics"] = std::move(rows);
  }
  // Scopes, names and locations are the model author's text: bytes that are not UTF-8 are
  // replaced rather than failing.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tandem::tools::explore
