#include "passes/plan_memory.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/streams.h"

namespace tandem::passes {
namespace {

constexpr int64_t kAlignment = 64;  // cache line; also what oneDNN and AVX-512 like

int64_t alignUp(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Does the runtime keep this value in an arena? Inputs are the host's batch and `param`
// results are views of variable storage.
bool inArena(const ir::Value& v) {
  ir::Op op = v.def()->op();
  return op != ir::Op::kInput && op != ir::Op::kParam;
}

struct Interval {
  const ir::Value* value;
  size_t device;
  int64_t start, end;  // node positions, both inclusive
  int64_t bytes;
};

// First-fit-by-size allocation over offsets, replayed in program order: a buffer is taken
// at its first position and given back after its last. Best fit keeps fragmentation low;
// neighbouring free blocks merge. (A library allocator would hand out addresses, not plan
// offsets ahead of time, hence this small one.)
class ArenaSimulator {
 public:
  int64_t allocate(int64_t bytes) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= bytes && (best == free_.end() || it->second < best->second)) best = it;
    int64_t offset;
    if (best != free_.end()) {
      offset = best->first;
      int64_t rest = best->second - bytes;
      free_.erase(best);
      if (rest > 0) free_[offset + bytes] = rest;
    } else if (!free_.empty() &&
               std::prev(free_.end())->first + std::prev(free_.end())->second == top_) {
      auto last = std::prev(free_.end());  // grow the free block at the top
      offset = last->first;
      top_ = offset + bytes;
      free_.erase(last);
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
    auto [it, inserted] = free_.emplace(offset, bytes);
    (void)inserted;
    if (auto next = std::next(it); next != free_.end() && offset + bytes == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t top() const { return top_; }
  int64_t peakLive() const { return peak_live_; }

 private:
  std::map<int64_t, int64_t> free_;  // offset -> bytes
  int64_t top_ = 0, live_ = 0, peak_live_ = 0;
};

}  // namespace

absl::StatusOr<ir::MemoryPlan> planMemory(const ir::Module& m, const ir::Graph& g) {
  const size_t num_devices = std::max<size_t>(m.devices().size(), 1);
  const int64_t n = static_cast<int64_t>(g.numNodes());
  auto deviceIndex = [&](const ir::Value& v) -> absl::StatusOr<size_t> {
    if (!m.isReplicated()) return 0;
    if (auto i = deviceIndexOfValue(m, v)) return *i;
    return absl::FailedPreconditionError(absl::StrCat("plan-memory: %", v.name(), " in @", g.name(),
                                                      " is on ", ir::toString(deviceOfValue(v)),
                                                      ", which is not a module device"));
  };
  std::vector<int64_t> pos(g.idBound(), 0);
  for (int64_t i = 0; i < n; ++i) pos[g.nodes()[static_cast<size_t>(i)]->id()] = i;

  // release[c][d]: the first compute position on device d that waits for collective c or
  // a later collective on d's comm stream; n when none does.
  auto users = g.users();
  std::vector<std::vector<int64_t>> release(g.idBound());
  std::vector<int64_t> earliest_wait(num_devices, n);
  for (int64_t i = n - 1; i >= 0; --i) {
    const ir::Node& c = *g.nodes()[static_cast<size_t>(i)];
    if (streamOf(c) != StreamKind::kComm) continue;
    for (size_t r = 0; r < c.numResults(); ++r) {
      auto d = deviceIndex(*c.result(r));
      if (!d.ok()) return d.status();
      auto it = users.find(c.result(r));
      if (it == users.end()) continue;
      for (const ir::Node* u : it->second)
        if (streamOf(*u) == StreamKind::kCompute)
          earliest_wait[*d] = std::min(earliest_wait[*d], pos[u->id()]);
    }
    release[c.id()] = earliest_wait;
  }

  std::vector<Interval> intervals;
  std::vector<uint8_t> returned(g.idBound(), 0);
  for (const ir::Value* v : g.outputs()) returned[v->def()->id()] = 1;
  for (const auto& node : g.nodes()) {
    const bool comm = streamOf(*node) == StreamKind::kComm;
    for (size_t r = 0; r < node->numResults(); ++r) {
      const ir::Value& v = *node->result(r);
      if (!inArena(v)) continue;
      auto d = deviceIndex(v);
      if (!d.ok()) return d.status();
      Interval iv{&v, *d, pos[node->id()], pos[node->id()],
                  alignUp(std::max<int64_t>(v.type().bytes(), 1))};
      if (comm) {
        // Written by the comm stream any time after the compute work it waits for.
        iv.start = 0;
        for (const ir::Value* o : node->operands()) {
          if (!inArena(*o) || streamOf(*o->def()) != StreamKind::kCompute) continue;
          auto od = deviceIndex(*o);
          if (!od.ok()) return od.status();
          if (*od == *d) iv.start = std::max(iv.start, pos[o->def()->id()] + 1);
        }
      }
      if (auto it = users.find(&v); it != users.end())
        for (const ir::Node* u : it->second)
          iv.end = std::max(
              iv.end, streamOf(*u) == StreamKind::kComm ? release[u->id()][*d] : pos[u->id()]);
      if (returned[node->id()] &&
          std::find(g.outputs().begin(), g.outputs().end(), &v) != g.outputs().end())
        iv.end = n;
      intervals.push_back(iv);
    }
  }

  ir::MemoryPlan plan;
  plan.planned_nodes = g.numNodes();
  plan.offsets.resize(g.idBound());
  for (const auto& node : g.nodes())
    plan.offsets[node->id()].assign(node->numResults(), ir::MemoryPlan::kNoOffset);
  plan.arena_bytes.assign(num_devices, 0);
  plan.live_peak_bytes.assign(num_devices, 0);
  plan.unshared_bytes.assign(num_devices, 0);

  // Replay: at each position, free what ended before it, then take what starts at it.
  std::vector<const Interval*> by_start, by_end;
  for (const Interval& iv : intervals) {
    by_start.push_back(&iv);
    by_end.push_back(&iv);
    plan.unshared_bytes[iv.device] += iv.bytes;
  }
  auto key = [](const Interval* a) { return std::make_pair(a->start, a->value->def()->id()); };
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](const Interval* a, const Interval* b) { return key(a) < key(b); });
  std::stable_sort(by_end.begin(), by_end.end(),
                   [](const Interval* a, const Interval* b) { return a->end < b->end; });
  std::vector<ArenaSimulator> arenas(num_devices);
  absl::flat_hash_map<const Interval*, int64_t> offset_of;
  size_t e = 0;
  for (const Interval* iv : by_start) {
    while (e < by_end.size() && by_end[e]->end < iv->start) {
      const Interval* done = by_end[e++];
      if (auto it = offset_of.find(done); it != offset_of.end())
        arenas[done->device].release(it->second, done->bytes);
    }
    int64_t off = arenas[iv->device].allocate(iv->bytes);
    offset_of[iv] = off;
    plan.offsets[iv->value->def()->id()][static_cast<size_t>(iv->value->index())] = off;
  }
  for (size_t d = 0; d < num_devices; ++d) {
    plan.arena_bytes[d] = arenas[d].top();
    plan.live_peak_bytes[d] = arenas[d].peakLive();
  }
  return plan;
}

absl::StatusOr<bool> PlanMemory::run(ir::Module& m) {
  for (const auto& g : m.graphs()) {
    auto plan = planMemory(m, *g);
    if (!plan.ok()) return plan.status();
    g->setMemoryPlan(std::make_shared<const ir::MemoryPlan>(std::move(*plan)));
  }
  return false;  // the IR itself is unchanged; the plan rides along with the graph
}

absl::StatusOr<std::unique_ptr<Pass>> PlanMemory::create(PassOptions& opts) {
  if (absl::Status s = opts.finish(); !s.ok()) return s;
  return std::unique_ptr<Pass>(new PlanMemory());
}

}  // namespace tandem::passes
