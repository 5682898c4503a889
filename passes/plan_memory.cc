#include "passes/plan_memory.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/placement.h"
#include "ir/status_macros.h"
#include "ir/target.h"

namespace tandem::passes {
namespace {

using ir::deviceIndexOfValue;
using ir::deviceOfValue;
using ir::StreamKind;

int64_t alignUp(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// Does the runtime keep this value in an arena? Inputs are the host's batch and `param`
// results are views of variable storage.
bool inArena(const ir::Value& v) {
  ir::Op op = v.def()->op();
  return !ir::isSource(op);
}

// The result index an interval of a node's workspace carries (a value's is its result's).
constexpr uint32_t kWorkspace = ~uint32_t{0};

// One arena buffer's lifetime: a value's, or a kernel's workspace (kWorkspace). It names its value
// by node id and result index rather than by pointer: the replay then never reaches back into the
// graph.
struct Interval {
  uint32_t node_id;
  uint32_t result;
  size_t device;
  int64_t start, end;  // node positions in [0, n], both inclusive
  int64_t bytes;
  int64_t offset = ir::GraphPlan::kNoOffset;  // set by the replay
};

// A view (a reshape) given its operand's bytes: the result of node `node_id`'s result
// `result` shares interval `root`'s offset, and that interval lives until the view's last
// reader too.
struct SharedView {
  uint32_t node_id;
  uint32_t result;
  size_t root;
};

// Every arena buffer's lifetime, and the views that hold no buffer of their own.
struct Lifetimes {
  std::vector<Interval> intervals;
  std::vector<SharedView> views;
};

// Which views share their operand's bytes: none (each is a copy), every one plan-memory may
// alias, or those the plan at hand gives their operand's offset (arenaBuffers, which
// recomputes the lifetimes of a plan already made).
enum class Views { kCopy, kAlias, kAsPlanned };

// Stable counting sort of `order` (indices) by key(i) in [0, bound): linear, where a
// comparison sort of millions of intervals would add a log factor.
template <typename Key>
std::vector<uint32_t> sortedBy(const std::vector<uint32_t>& order, size_t bound, Key key) {
  std::vector<size_t> first(bound + 1, 0);
  for (uint32_t i : order) ++first[key(i) + 1];
  for (size_t k = 1; k <= bound; ++k) first[k] += first[k - 1];
  std::vector<uint32_t> out(order.size());
  for (uint32_t i : order) out[first[key(i)]++] = i;
  return out;
}

// Best-fit allocation over offsets, replayed in program order: a buffer is taken at its
// first position and given back after its last. Best fit keeps fragmentation low;
// neighbouring free blocks merge. Free blocks are indexed by offset (to merge) and by
// size (to find the best fit in O(log blocks) rather than by scanning). (A library
// allocator would hand out addresses, not plan offsets ahead of time, hence this one.)
class ArenaSimulator {
 public:
  int64_t allocate(int64_t bytes) {
    // The smallest block that fits; among equal sizes the lowest offset.
    auto best = by_size_.lower_bound({bytes, std::numeric_limits<int64_t>::min()});
    int64_t offset;
    if (best != by_size_.end()) {
      auto [size, at] = *best;
      offset = at;
      erase(free_.find(at));
      if (size > bytes) insert(offset + bytes, size - bytes);
    } else if (!free_.empty() &&
               std::prev(free_.end())->first + std::prev(free_.end())->second == top_) {
      auto last = std::prev(free_.end());  // grow the free block at the top
      offset = last->first;
      top_ = offset + bytes;
      erase(last);
    } else {
      offset = top_;
      top_ += bytes;
    }
    live_ += bytes;
    peak_live_ = std::max(peak_live_, live_);
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    live_ -= bytes;
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        bytes += prev->second;
        erase(prev);
      }
    }
    insert(offset, bytes);
  }
  int64_t top() const { return top_; }
  int64_t peakLive() const { return peak_live_; }

 private:
  void insert(int64_t offset, int64_t bytes) {
    free_.emplace(offset, bytes);
    by_size_.emplace(bytes, offset);
  }
  std::map<int64_t, int64_t>::iterator erase(std::map<int64_t, int64_t>::iterator it) {
    by_size_.erase({it->second, it->first});
    return free_.erase(it);
  }
  std::map<int64_t, int64_t> free_;                // offset -> bytes
  std::set<std::pair<int64_t, int64_t>> by_size_;  // (bytes, offset) of the same blocks
  int64_t top_ = 0, live_ = 0, peak_live_ = 0;
};

// The lifetime of every arena value of `g`, in node order. One sweep visits every node,
// operand and result once (each visit is a walk through the graph's pointers, what a pass
// over a large graph spends most of its time on), plus, per collective, each device and
// operand once more (a collective has at least one operand or result per device, so that
// is within the graph's size too); the rest runs over flat arrays.
absl::StatusOr<Lifetimes> liveIntervals(const ir::Module& m, const ir::Graph& g,
                                        const ir::GraphPlan& plan, int64_t& steps,
                                        int64_t alignment, Views views) {
  const size_t num_devices = std::max<size_t>(m.devices().size(), 1);
  const int64_t n = static_cast<int64_t>(g.numNodes());
  ir::DeviceIndexCache device_index(m);
  auto deviceIndex = [&](const ir::Value& v) -> absl::StatusOr<size_t> {
    if (!m.isReplicated()) return 0;
    const ir::Device d = deviceOfValue(v);
    if (auto i = device_index(d)) return *i;
    return absl::FailedPreconditionError(absl::StrCat("plan-memory: %", v.name(), " in @", g.name(),
                                                      " is on ", ir::toString(d),
                                                      ", which is not a module device"));
  };
  // By node id: position, the plan's stream, and the dense number of its first result
  // (first_value[node id] + result index), so that the lifetimes live in flat vectors: a
  // hash map of users outgrows the caches at thousands of devices and makes every edge a
  // cache miss. Filled as the sweep reaches each node: operands and waits name earlier ones.
  std::vector<int64_t> pos(g.idBound(), -1);
  std::vector<uint32_t> first_value(g.idBound(), 0);
  enum : uint8_t { kNowhere, kComputeStream, kCommStream };
  std::vector<uint8_t> stream(g.idBound(), kNowhere);
  // last_use[v]: the last position v must stay intact for: its last compute reader, or for
  // a collective reading it, the compute work on v's device that waits for that collective.
  std::vector<int64_t> last_use;
  last_use.reserve(g.numNodes() * 2);
  auto number = [&](const ir::Value& v) {
    return first_value[v.def()->id()] + static_cast<size_t>(v.index());
  };

  // release[c][d] = release_at[release_base[c] + d]: the first compute position on device d
  // that waits for collective c's share on d or a later share of d's comm stream (the
  // events of plan-events); n when none does. Each device's comm shares in issue order,
  // released front to back as the compute stream's waits reach them.
  std::vector<uint32_t> release_base(g.idBound(), 0);
  std::vector<int64_t> release_at;
  std::vector<std::vector<const ir::Node*>> comm_on(num_devices);
  std::vector<size_t> released(num_devices, 0);
  std::vector<const ir::Node*> comms;  // the collectives, in order
  // For a collective: per device, just after the last compute node it reads there. One
  // sweep over its operands serves all its results (a collective has a few per device).
  std::vector<int64_t> comm_start(num_devices, 0);
  // Each device's target, asked for the workspace of each compute node there (looked up
  // once: the registry takes a lock).
  std::vector<const ir::TargetInfo*> targets(num_devices, nullptr);
  for (size_t d = 0; d < m.devices().size(); ++d) targets[d] = ir::findTarget(m.devices()[d].kind);

  std::vector<Interval> intervals;
  intervals.reserve(g.numNodes() * 2);
  // By value number: the interval holding the value's bytes (a shared view's: its root's).
  std::vector<size_t> interval_of;
  interval_of.reserve(g.numNodes() * 2);
  std::vector<SharedView> shared;
  for (int64_t i = 0; i < n; ++i) {
    const ir::Node& u = *g.nodes()[static_cast<size_t>(i)];
    pos[u.id()] = i;
    first_value[u.id()] = static_cast<uint32_t>(last_use.size());
    last_use.resize(last_use.size() + u.numResults(), 0);
    interval_of.resize(last_use.size(), SIZE_MAX);
    const ir::NodePlan& p = plan.of(u);
    const std::optional<StreamKind>& s = p.stream;
    const bool comm = s == StreamKind::kComm;
    stream[u.id()] = !s ? kNowhere : comm ? kCommStream : kComputeStream;
    steps += 1;
    if (comm) {
      for (size_t d : ir::sharesOf(m, u)) comm_on[d].push_back(&u);
      release_base[u.id()] = static_cast<uint32_t>(release_at.size());
      release_at.resize(release_at.size() + num_devices, n);
      comms.push_back(&u);
      std::fill(comm_start.begin(), comm_start.end(), 0);
      for (const ir::Value* o : u.operands()) {
        if (!inArena(*o) || stream[o->def()->id()] != kComputeStream) continue;
        ASSIGN_OR_RETURN(size_t od, deviceIndex(*o));
        comm_start[od] = std::max(comm_start[od], pos[o->def()->id()] + 1);
      }
      steps += static_cast<int64_t>(3 * num_devices + u.numOperands());
    } else {
      for (const ir::Value* o : u.operands())
        if (inArena(*o)) last_use[number(*o)] = std::max(last_use[number(*o)], i);
      steps += static_cast<int64_t>(u.numOperands());
    }
    if (stream[u.id()] == kComputeStream) {
      const size_t du = *device_index(*u.device());
      for (const ir::ValueRef& r : p.waits) {
        const ir::Node* c = r.node < pos.size() && pos[r.node] >= 0
                                ? g.nodes()[static_cast<size_t>(pos[r.node])].get()
                                : nullptr;
        if (c == nullptr || r.result >= c->numResults())
          return absl::FailedPreconditionError(
              absl::StrCat("plan-memory: ", u.describe(),
                           " waits for a value that is not written before it in @", g.name(),
                           " (the plan verifier names it)"));
        if (stream[c->id()] != kCommStream) continue;
        ASSIGN_OR_RETURN(size_t d, deviceIndex(*c->result(r.result)));
        if (d != du) continue;  // another device's stream orders nothing here
        auto& queue = comm_on[d];
        while (released[d] < queue.size() && pos[queue[released[d]]->id()] <= pos[c->id()])
          release_at[release_base[queue[released[d]++]->id()] + d] = i;
      }
      steps += static_cast<int64_t>(p.waits.size());
    }
    if (stream[u.id()] == kComputeStream && views != Views::kCopy &&
        (views == Views::kAlias ? ir::viewCanShareBytes(u) : ir::viewSharesBytes(plan, u))) {
      const size_t root = interval_of[number(*u.operand(0))];
      if (root != SIZE_MAX) {
        interval_of[number(*u.result(0))] = root;
        shared.push_back({u.id(), 0, root});
        continue;  // no buffer and no workspace of its own: its kernel copies nothing
      }
    }
    for (size_t r = 0; r < u.numResults(); ++r) {
      const ir::Value& v = *u.result(r);
      if (!inArena(v)) continue;
      ASSIGN_OR_RETURN(size_t d, deviceIndex(v));
      interval_of[number(v)] = intervals.size();
      // Until its last use (filled in below). A collective's result is written by the comm
      // stream any time after the compute work it waits for.
      intervals.push_back({u.id(), static_cast<uint32_t>(r), d, comm ? comm_start[d] : i, i,
                           alignUp(std::max<int64_t>(v.type().bytes(), 1), alignment)});
    }
    steps += static_cast<int64_t>(u.numResults());
    // Its workspace: live only while it runs, so every workspace of a device shares the
    // bytes that no value holds at that position.
    if (stream[u.id()] == kComputeStream && u.device()) {
      const size_t du = *device_index(*u.device());
      ASSIGN_OR_RETURN(int64_t need, ir::declaredWorkspace(targets[du], u));
      if (need > 0) intervals.push_back({u.id(), kWorkspace, du, i, i, alignUp(need, alignment)});
    }
  }

  // What the collectives read stays until the compute work on its device waits for them
  // (release, now complete). A one-share collective (concat's gather) reads other devices'
  // values: nothing on their streams waits for it, so those bytes stay until the step ends.
  for (const ir::Node* c : comms) {
    std::optional<size_t> only_share;
    if (std::vector<size_t> shares = ir::sharesOf(m, *c); shares.size() == 1)
      only_share = shares[0];
    const int64_t* release = &release_at[release_base[c->id()]];
    for (const ir::Value* o : c->operands()) {
      if (!inArena(*o)) continue;
      ASSIGN_OR_RETURN(size_t d, deviceIndex(*o));
      const int64_t end = !only_share || *only_share == d ? release[d] : n;
      last_use[number(*o)] = std::max(last_use[number(*o)], end);
    }
    steps += static_cast<int64_t>(c->numOperands());
  }
  for (const ir::Value* v : g.outputs())
    if (inArena(*v)) last_use[number(*v)] = n;

  for (Interval& iv : intervals) {
    if (iv.result == kWorkspace) continue;
    iv.end = std::max(iv.end, last_use[first_value[iv.node_id] + iv.result]);
    // A collective's result may still be being written until the compute stream waits for
    // it (or for a later comm share): a result nothing reads (a hierarchical reduction's
    // group sum on a device that is not its group's first) must not hand its bytes to
    // compute work before then.
    if (stream[iv.node_id] == kCommStream)
      iv.end = std::max(iv.end, release_at[release_base[iv.node_id] + iv.device]);
  }
  // A view's bytes are its root's: they stay until the view's last use as well.
  for (const SharedView& sv : shared) {
    Interval& root = intervals[sv.root];
    root.end = std::max(root.end, last_use[first_value[sv.node_id] + sv.result]);
  }
  steps += static_cast<int64_t>(intervals.size() + shared.size());
  return Lifetimes{std::move(intervals), std::move(shared)};
}

// Replays the intervals in program order: at each position, free what ended before it,
// then take what starts at it. Fills the plan's offsets and per-device sizes.
void replay(Lifetimes& lifetimes, const ir::Graph& g, ir::GraphPlan& plan, int64_t& steps) {
  std::vector<Interval>& intervals = lifetimes.intervals;
  const size_t num_devices = plan.arenas.size();
  std::vector<uint32_t> order(intervals.size());
  for (uint32_t i = 0; i < order.size(); ++i) {
    order[i] = i;
    plan.arenas[intervals[i].device].unshared_bytes += intervals[i].bytes;
  }
  // Taken by (start, node id), given back by end; ties keep creation order.
  const size_t positions = g.numNodes() + 1;
  std::vector<uint32_t> by_start =
      sortedBy(sortedBy(order, g.idBound(), [&](uint32_t i) { return intervals[i].node_id; }),
               positions, [&](uint32_t i) { return static_cast<size_t>(intervals[i].start); });
  std::vector<uint32_t> by_end =
      sortedBy(order, positions, [&](uint32_t i) { return static_cast<size_t>(intervals[i].end); });
  std::vector<ArenaSimulator> arenas(num_devices);
  size_t e = 0;
  for (uint32_t i : by_start) {
    Interval& iv = intervals[i];
    while (e < by_end.size() && intervals[by_end[e]].end < iv.start) {
      const Interval& done = intervals[by_end[e++]];
      if (done.offset != ir::GraphPlan::kNoOffset)
        arenas[done.device].release(done.offset, done.bytes);
    }
    iv.offset = arenas[iv.device].allocate(iv.bytes);
    if (iv.result == kWorkspace) {
      plan.nodes[iv.node_id].workspace = ir::WorkspacePlan{iv.offset, iv.bytes};
    } else {
      plan.nodes[iv.node_id].offsets[iv.result] = iv.offset;
    }
  }
  for (const SharedView& sv : lifetimes.views)
    plan.nodes[sv.node_id].offsets[sv.result] = intervals[sv.root].offset;
  for (size_t d = 0; d < num_devices; ++d) {
    plan.arenas[d].bytes = arenas[d].top();
    plan.arenas[d].live_peak_bytes = arenas[d].peakLive();
  }
  // Three counting sorts, then one allocation and one release per interval.
  steps += static_cast<int64_t>(3 * intervals.size() + 2 * positions + g.idBound() +
                                2 * intervals.size() + lifetimes.views.size() + num_devices);
}

}  // namespace

absl::Status planMemory(const ir::Module& m, const ir::Graph& g, ir::GraphPlan& plan,
                        PlanMemoryWork* work, int64_t alignment, bool alias_views) {
  int64_t steps = 0;
  // Every node's offsets, one per arena result, are set by the replay.
  for (const auto& u : g.nodes()) {
    ir::NodePlan& p = plan.of(*u);
    p.offsets.clear();
    p.workspace.reset();
    if (!ir::isSource(u->op())) p.offsets.assign(u->numResults(), ir::GraphPlan::kNoOffset);
  }
  ASSIGN_OR_RETURN(Lifetimes lifetimes, liveIntervals(m, g, plan, steps, alignment,
                                                      alias_views ? Views::kAlias : Views::kCopy));
  const size_t num_devices = std::max<size_t>(m.devices().size(), 1);
  plan.alignment = alignment;
  plan.arenas.assign(num_devices, {});
  replay(lifetimes, g, plan, steps);
  plan.add(ir::PlanPart::kMemory);
  if (work != nullptr) work->steps += steps;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ArenaBuffer>> arenaBuffers(const ir::Module& m, const ir::Graph& g) {
  RETURN_IF_ERROR(ir::requirePlanPart(g, ir::PlanPart::kMemory, "plan-memory"));
  const ir::GraphPlan& plan = *g.plan();
  int64_t steps = 0;
  ASSIGN_OR_RETURN(
      Lifetimes lifetimes,
      liveIntervals(m, g, plan, steps, std::max<int64_t>(plan.alignment, 1), Views::kAsPlanned));
  const std::vector<Interval>& intervals = lifetimes.intervals;
  std::vector<const ir::Node*> by_id(g.idBound(), nullptr);
  for (const auto& n : g.nodes()) by_id[n->id()] = n.get();
  std::vector<ArenaBuffer> out;
  out.reserve(intervals.size());
  for (const Interval& iv : intervals) {
    const ir::NodePlan& p = plan.nodes[iv.node_id];
    ArenaBuffer b{.node = by_id[iv.node_id],
                  .device = iv.device,
                  .first = iv.start,
                  .last = iv.end,
                  .bytes = iv.bytes};
    if (iv.result == kWorkspace) {
      if (!p.workspace) continue;  // a plan made without the target's workspace
      b.offset = p.workspace->offset;
    } else {
      b.result = iv.result;
      b.offset = iv.result < p.offsets.size() ? p.offsets[iv.result] : ir::GraphPlan::kNoOffset;
    }
    out.push_back(b);
  }
  return out;
}

absl::StatusOr<bool> PlanMemory::run(ir::Module& m) {
  for (const auto& g : m.graphs()) {
    RETURN_IF_ERROR(ir::requirePlanPart(*g, ir::PlanPart::kEvents, "plan-events"));
    RETURN_IF_ERROR(planMemory(m, *g, *g->mutablePlan(), nullptr, alignment_, alias_views_));
  }
  return true;
}

std::string PlanMemory::optionsText() const {
  std::vector<std::string> set;
  if (alignment_ != 64) set.push_back(absl::StrCat("alignment=", alignment_));
  if (!alias_views_) set.push_back("views=copy");
  return set.empty() ? "" : absl::StrCat("{", absl::StrJoin(set, ","), "}");
}

absl::StatusOr<std::unique_ptr<Pass>> PlanMemory::create(PassOptions& opts) {
  auto alignment = opts.getInt("alignment", 64);
  if (!alignment.ok()) return alignment.status();
  ASSIGN_OR_RETURN(const std::string views, opts.getString("views", "alias"));
  RETURN_IF_ERROR(opts.finish());
  if (views != "alias" && views != "copy")
    return absl::InvalidArgumentError(absl::StrCat(
        "pass plan-memory: option 'views' must be alias (a reshape shares its operand's "
        "bytes) or copy (it gets its own), got '",
        views, "'"));
  // A power of two, as every allocator's alignment is; 4 KiB is a page.
  if (*alignment < 1 || *alignment > 4096 || (*alignment & (*alignment - 1)) != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "pass plan-memory: option 'alignment' must be a power of two from 1 to 4096, got ",
        *alignment));
  return std::unique_ptr<Pass>(new PlanMemory(*alignment, views == "alias"));
}

}  // namespace tandem::passes
