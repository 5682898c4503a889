#include "ir/plan_verifier.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/interfaces.h"
#include "ir/layout_rules.h"
#include "ir/plan.h"
#include "ir/status_macros.h"
#include "ir/target.h"

namespace tandem::ir {
namespace {

constexpr uint32_t kNone = ~uint32_t{0};

// What is known complete, per stream, when a share has completed: the latest share index
// of each stream it is ordered after (itself included), sorted by stream. Sparse: a share
// of a data-parallel step only ever learns about its own device's two streams, so this
// stays two entries long at any device count (a dense vector clock would be 2 x devices).
using Clock = absl::InlinedVector<std::pair<uint32_t, uint32_t>, 2>;

void merge(Clock& into, const Clock& from) {
  Clock out;
  out.reserve(into.size() + from.size());
  size_t i = 0, j = 0;
  while (i < into.size() || j < from.size()) {
    if (j == from.size() || (i < into.size() && into[i].first < from[j].first)) {
      out.push_back(into[i++]);
    } else if (i == into.size() || from[j].first < into[i].first) {
      out.push_back(from[j++]);
    } else {
      out.push_back({into[i].first, std::max(into[i].second, from[j].second)});
      ++i, ++j;
    }
  }
  into = std::move(out);
}

void advance(Clock& c, uint32_t stream, uint32_t share) {
  auto it = std::lower_bound(c.begin(), c.end(), std::make_pair(stream, uint32_t{0}));
  if (it != c.end() && it->first == stream) {
    it->second = std::max(it->second, share);
  } else {
    c.insert(it, {stream, share});
  }
}

// One buffer of a device's arena in the race sweep: a value's bytes, or a kernel's
// workspace (value null), which only its own node touches.
struct Buffer {
  const Value* value = nullptr;
  const Node* node = nullptr;  // the writer's node
  uint32_t writer = kNone;  // share index
  size_t device = 0;
  int64_t begin = 0, end = 0;
};

// A run of bytes of an arena and the buffer that holds it last.
struct Piece {
  int64_t end;
  uint32_t buffer;
};

class PlanVerifier {
 public:
  explicit PlanVerifier(const Graph& g) : g_(g), m_(*g.module()), plan_(*g.plan()) {}

  absl::Status run() {
    RETURN_IF_ERROR(checkHeader());
    RETURN_IF_ERROR(checkStreams());
    if (plan_.has(PlanPart::kLayouts)) RETURN_IF_ERROR(checkLayouts());
    if (plan_.has(PlanPart::kAlgorithms)) RETURN_IF_ERROR(checkAlgorithms());
    if (!plan_.has(PlanPart::kEvents)) return absl::OkStatus();
    numberShares();
    RETURN_IF_ERROR(checkWaits());
    RETURN_IF_ERROR(orderAndCheckReads());
    if (!plan_.has(PlanPart::kMemory)) return absl::OkStatus();
    RETURN_IF_ERROR(checkOffsets());
    return checkArenas();
  }

 private:
  absl::Status fail(absl::string_view msg) const {
    return absl::FailedPreconditionError(absl::StrCat("graph @", g_.name(), ": plan: ", msg));
  }
  absl::Status failAt(const Node& n, absl::string_view msg) const {
    return fail(absl::StrCat(n.describe(), ": ", msg));
  }

  absl::Status checkHeader() {
    if (!m_.isReplicated())
      return fail("the module is not replicated: a plan places work on devices");
    if (plan_.nodes.size() < g_.idBound())
      return fail(absl::StrCat("it covers ", plan_.nodes.size(), " node ids, the graph has ",
                               g_.idBound()));
    if (!plan_.has(PlanPart::kStreams)) return fail("it has no streams (run assign-streams)");
    if (plan_.has(PlanPart::kMemory) && !plan_.has(PlanPart::kEvents))
      return fail("it has memory but no events: the arena's reuse is ordered by the events");
    RETURN_IF_ERROR(checkPlanFor(g_, PlanPart::kStreams, "assign-streams"));
    if (plan_.has(PlanPart::kMemory)) {
      if (plan_.alignment < 1 || (plan_.alignment & (plan_.alignment - 1)) != 0)
        return fail(absl::StrCat("its alignment ", plan_.alignment, " is not a power of two"));
      if (plan_.arenas.size() != m_.devices().size())
        return fail(absl::StrCat("it has ", plan_.arenas.size(), " arenas for ",
                                 m_.devices().size(), " devices"));
    } else if (!plan_.arenas.empty()) {
      return fail("it has arenas but no memory");
    }
    return absl::OkStatus();
  }

  absl::Status checkStreams() {
    position_.assign(g_.idBound(), kNone);
    by_id_.assign(g_.idBound(), nullptr);
    for (size_t i = 0; i < g_.numNodes(); ++i) {
      const Node& n = *g_.nodes()[i];
      position_[n.id()] = static_cast<uint32_t>(i);
      by_id_[n.id()] = &n;
      const NodePlan& p = plan_.of(n);
      const bool runs = !isSource(n.op());
      if (!runs && (p.stream || !p.waits.empty() || !p.layouts.empty() || !p.algorithm.empty() ||
                    !p.offsets.empty() || p.workspace))
        return failAt(n, "runs nowhere (host data or variable storage) but has a plan");
      if (runs && !p.stream) return failAt(n, "has no stream");
      if (!plan_.has(PlanPart::kEvents) && !p.waits.empty())
        return failAt(n, "has waits but the plan has no events");
      if (!plan_.has(PlanPart::kLayouts) && !p.layouts.empty())
        return failAt(n, "has layouts but the plan has none");
      if (!plan_.has(PlanPart::kAlgorithms) && !p.algorithm.empty())
        return failAt(n, "has an algorithm but the plan has none");
      if (!plan_.has(PlanPart::kMemory) && !p.offsets.empty())
        return failAt(n, "has offsets but the plan has no memory");
      if (!plan_.has(PlanPart::kMemory) && p.workspace)
        return failAt(n, "has a workspace but the plan has no memory");
    }
    return absl::OkStatus();
  }

  // Every layout is one its kernels take: each result's on its own (eligible, the device's
  // layout, not a graph output), then each node's slots (a collective, the host and every
  // kernel outside the rules see plain tensors; linked slots share one layout).
  absl::Status checkLayouts() {
    LayoutTargets targets;
    auto layout_of = [&](const Value& v) { return plan_.layout(v); };
    for (const auto& node : g_.nodes()) {
      const Node& n = *node;
      const NodePlan& p = plan_.of(n);
      if (!p.layouts.empty() && p.layouts.size() != n.numResults())
        return failAt(n, absl::StrCat("it has ", p.layouts.size(), " layouts for ", n.numResults(),
                                      " results"));
      const TargetInfo* t = targets.of(n);
      for (size_t r = 0; r < p.layouts.size(); ++r)
        if (absl::Status s = checkValueLayout(*n.result(r), t, p.layouts[r]); !s.ok())
          return failAt(n, s.message());
      if (absl::Status s = checkNodeLayouts(n, t, layout_of); !s.ok()) return fail(s.message());
    }
    for (const Value* v : g_.outputs())
      if (const ActivationLayout l = plan_.layout(*v); l != ActivationLayout::kPlain)
        return fail(absl::StrCat("graph output %", v->name(), " is planned ", layoutName(l),
                                 ": the host reads outputs plain"));
    return absl::OkStatus();
  }

  // Every algorithm is one its node's kernel can run with the layouts planned around it
  // (its target's AlgorithmRules::offered).
  absl::Status checkAlgorithms() {
    const AlgorithmRules::LayoutOf layout_of = [&](const Value& v) { return plan_.layout(v); };
    for (const auto& node : g_.nodes()) {
      const Node& n = *node;
      const std::string& algorithm = plan_.of(n).algorithm;
      if (algorithm.empty()) continue;
      const TargetInfo* t = n.device() ? findTarget(n.device()->kind) : nullptr;
      const std::vector<std::string> offered = t != nullptr && t->algorithm_rules.offered
                                                   ? t->algorithm_rules.offered(n, layout_of)
                                                   : std::vector<std::string>{};
      if (std::find(offered.begin(), offered.end(), algorithm) != offered.end()) continue;
      return failAt(n, offered.empty()
                           ? absl::StrCat("algo=", algorithm,
                                          ", but its kernel has no algorithms "
                                          "to choose from")
                           : absl::StrCat("algo=", algorithm, " is not one its kernel runs here (",
                                          absl::StrJoin(offered, ", "), ")"));
    }
    return absl::OkStatus();
  }

  // Share indices in issue order: node by node, each node's shares in sharesOf order.
  void numberShares() {
    first_share_.assign(g_.idBound(), kNone);
    for (const auto& node : g_.nodes()) {
      const std::vector<size_t> shares = sharesOf(m_, *node);
      if (shares.empty()) continue;
      first_share_[node->id()] = static_cast<uint32_t>(share_node_.size());
      const uint32_t kind = *plan_.of(*node).stream == StreamKind::kComm ? 1 : 0;
      for (size_t d : shares) {
        share_node_.push_back(node.get());
        share_stream_.push_back(static_cast<uint32_t>(d * 2) + kind);
      }
    }
  }

  StreamSlot slotOf(uint32_t share) const {
    return {share_stream_[share] / 2,
            share_stream_[share] % 2 ? StreamKind::kComm : StreamKind::kCompute};
  }
  std::string onSlot(uint32_t share) const { return slotName(m_, slotOf(share)); }

  // The share that writes `v`: its node's only share, or for a collective the one on v's
  // device (results are grouped by device, as deviceOfValue reads them).
  uint32_t writerOf(const Value& v) const {
    const Node& def = *v.def();
    const uint32_t first = first_share_[def.id()];
    if (first == kNone || streamOf(def) != StreamKind::kComm) return first;
    return first + static_cast<uint32_t>(
                       CollectiveView(def).positionOfResult(static_cast<size_t>(v.index())));
  }

  // Resolves every wait into (waiting share, writer share), checking what it names.
  absl::Status checkWaits() {
    waits_.assign(share_node_.size(), {});
    std::vector<uint32_t> share_on(m_.devices().size(), kNone);  // of the node at hand
    for (const auto& node : g_.nodes()) {
      const Node& n = *node;
      const NodePlan& p = plan_.of(n);
      if (p.waits.empty()) continue;
      const std::vector<size_t> shares = sharesOf(m_, n);
      for (size_t k = 0; k < shares.size(); ++k)
        share_on[shares[k]] = first_share_[n.id()] + static_cast<uint32_t>(k);
      for (const ValueRef& r : p.waits) {
        const Node* def = r.node < by_id_.size() ? by_id_[r.node] : nullptr;
        if (def == nullptr || r.result >= def->numResults())
          return failAt(n, absl::StrCat("waits for result ", r.result, " of node id ", r.node,
                                        ", which is not in the graph"));
        const Value& v = *def->result(r.result);
        if (position_[def->id()] >= position_[n.id()])
          return failAt(n, absl::StrCat("waits for %", v.name(), ", which ", def->describe(),
                                        " writes later (waits look back in issue order)"));
        const uint32_t writer = writerOf(v);
        if (writer == kNone)
          return failAt(n,
                        absl::StrCat("waits for %", v.name(),
                                     ", which no stream writes (host data or variable storage)"));
        const size_t device = share_stream_[writer] / 2;
        const uint32_t waiting = shares.size() == 1 ? first_share_[n.id()] : share_on[device];
        if (waiting == kNone)
          return failAt(
              n, absl::StrCat("waits for %", v.name(), " on ", toString(m_.devices()[device]),
                              ", where it runs no share"));
        if (share_stream_[waiting] == share_stream_[writer])
          return failAt(n, absl::StrCat("waits for %", v.name(), " on its own stream ",
                                        onSlot(waiting), " (the stream's order covers it)"));
        waits_[waiting].push_back(writer);
      }
      for (size_t d : shares) share_on[d] = kNone;
    }
    return absl::OkStatus();
  }

  // Whether share `a` completes before share `b` starts.
  bool before(uint32_t a, uint32_t b) const {
    if (a == b) return false;
    if (share_stream_[a] == share_stream_[b]) return a < b;
    const Clock& c = clock_[b];
    auto it = std::lower_bound(c.begin(), c.end(), std::make_pair(share_stream_[a], uint32_t{0}));
    return it != c.end() && it->first == share_stream_[a] && it->second >= a;
  }

  // Dense number of each value (first_value_[node id] + result index).
  size_t numberOf(const Value& v) const {
    return first_value_[v.def()->id()] + static_cast<size_t>(v.index());
  }

  // The clocks in issue order, checking each read as its share comes; and, per value, its
  // last reader on each stream (what the arena sweep must see done before reuse).
  absl::Status orderAndCheckReads() {
    first_value_.assign(g_.idBound(), 0);
    size_t values = 0;
    for (const auto& n : g_.nodes()) {
      first_value_[n->id()] = values;
      values += n->numResults();
    }
    last_readers_.assign(values, {});
    findSharedViews(values);
    clock_.assign(share_node_.size(), {});
    std::vector<uint32_t> last_on(m_.devices().size() * 2, kNone);
    for (uint32_t s = 0; s < share_node_.size(); ++s) {
      const uint32_t stream = share_stream_[s];
      Clock& c = clock_[s];
      if (last_on[stream] != kNone) c = clock_[last_on[stream]];
      for (uint32_t w : waits_[s]) merge(c, clock_[w]);
      advance(c, stream, s);
      last_on[stream] = s;
      const Node& n = *share_node_[s];
      for (const Value* v : readsOf(m_, n, s - first_share_[n.id()])) {
        const uint32_t writer = writerOf(*v);
        if (writer == kNone) continue;  // host data, variable storage
        if (!before(writer, s))
          return failAt(n, absl::StrCat("reads %", v->name(), " on ", onSlot(s), ", but ",
                                        v->def()->describe(), " writes it on ", onSlot(writer),
                                        " and no wait orders that before the read"));
        auto& readers = last_readers_[numberOf(*bytesOf(*v))];
        auto it = std::find_if(readers.begin(), readers.end(),
                               [&](uint32_t r) { return share_stream_[r] == stream; });
        if (it == readers.end()) {
          readers.push_back(s);
        } else {
          *it = s;
        }
      }
    }
    return absl::OkStatus();
  }

  static bool inArena(const Node& n) { return !isSource(n.op()); }

  // The value whose arena bytes `v` is: itself, or for a view plan-memory gave its
  // operand's offset (a reshape that copies nothing), what that operand's bytes are.
  const Value* bytesOf(const Value& v) const { return bytes_of_[numberOf(v)]; }

  // Fills bytes_of_ (values numbered; plans without memory: every value its own).
  void findSharedViews(size_t values) {
    bytes_of_.assign(values, nullptr);
    for (const auto& n : g_.nodes())
      for (size_t r = 0; r < n->numResults(); ++r) {
        const Value& v = *n->result(r);
        bytes_of_[numberOf(v)] = plan_.has(PlanPart::kMemory) && viewSharesBytes(plan_, *n)
                                     ? bytesOf(*n->operand(0))
                                     : &v;
      }
  }

  absl::Status checkOffsets() {
    std::vector<const TargetInfo*> targets;  // by device: asked what each kernel declares
    for (const Device& d : m_.devices()) targets.push_back(findTarget(d.kind));
    for (const auto& node : g_.nodes()) {
      const Node& n = *node;
      const NodePlan& p = plan_.of(n);
      if (inArena(n) && *p.stream == StreamKind::kCompute)
        RETURN_IF_ERROR(checkWorkspace(n, targets[share_stream_[first_share_[n.id()]] / 2]));
      if (p.workspace && *p.stream != StreamKind::kCompute)
        return failAt(n,
                      "runs on the comm stream but has a workspace (a collective's library "
                      "brings its own buffers)");
      if (!inArena(n) || n.numResults() == 0) continue;
      if (p.offsets.size() != n.numResults())
        return failAt(
            n, absl::StrCat("has ", p.offsets.size(), " offsets for ", n.numResults(), " results"));
      for (size_t r = 0; r < n.numResults(); ++r) {
        const Value& v = *n.result(r);
        const size_t d = share_stream_[writerOf(v)] / 2;
        const int64_t off = p.offsets[r];
        if (off % plan_.alignment != 0)
          return failAt(n,
                        absl::StrCat("%", v.name(), " is at offset ", off,
                                     ", not a multiple of the plan's alignment ", plan_.alignment));
        if (off < 0 || off + v.type().bytes() > plan_.arenas[d].bytes)
          return failAt(n, absl::StrCat("%", v.name(), " at [", off, ", ", off + v.type().bytes(),
                                        ") lies outside ", toString(m_.devices()[d]),
                                        "'s arena of ", plan_.arenas[d].bytes, " bytes"));
      }
    }
    return absl::OkStatus();
  }

  // A compute node's workspace: at least what its target declares (when the target is
  // known: a module planned for a kind this build lacks keeps what its text says), aligned,
  // inside the arena. A collective has none: its library brings its own buffers.
  absl::Status checkWorkspace(const Node& n, const TargetInfo* target) {
    const std::optional<WorkspacePlan>& w = plan_.of(n).workspace;
    const size_t d = share_stream_[first_share_[n.id()]] / 2;
    absl::StatusOr<int64_t> declared = declaredWorkspace(target, n);
    if (!declared.ok()) return failAt(n, declared.status().message());
    const int64_t planned = w ? w->bytes : 0;
    if (planned < *declared)
      return failAt(n, absl::StrCat("its kernel declares ", *declared, " bytes of workspace on ",
                                    toString(m_.devices()[d]), ", the plan gives it ", planned,
                                    " (run plan-memory again)"));
    if (!w) return absl::OkStatus();
    if (w->offset % plan_.alignment != 0)
      return failAt(n, absl::StrCat("its workspace is at offset ", w->offset,
                                    ", not a multiple of the plan's alignment ", plan_.alignment));
    if (w->offset < 0 || w->bytes <= 0 || w->offset + w->bytes > plan_.arenas[d].bytes)
      return failAt(n, absl::StrCat("its workspace at [", w->offset, ", ", w->offset + w->bytes,
                                    ") lies outside ", toString(m_.devices()[d]), "'s arena of ",
                                    plan_.arenas[d].bytes, " bytes"));
    return absl::OkStatus();
  }

  // How messages name a buffer: "%v", or "the workspace of %x (conv2d @cuda:0)".
  static std::string nameOf(const Buffer& b) {
    return b.value != nullptr ? absl::StrCat("%", b.value->name())
                              : absl::StrCat("the workspace of ", b.node->describe());
  }

  std::string bytesOn(size_t device, int64_t begin, int64_t end) const {
    return absl::StrCat("bytes [", begin, ", ", end, ") of ", toString(m_.devices()[device]),
                        "'s arena");
  }

  // The race sweep: buffers in the issue order of their writers; each takes its bytes from
  // whatever held them last, which is only safe when every access of that earlier buffer
  // is ordered before the new write. Checking the last holder of each byte suffices: a
  // holder's accesses end before its successor's write, which begins after its own.
  absl::Status checkArenas() {
    std::vector<Buffer> buffers;
    for (const auto& node : g_.nodes()) {
      if (!inArena(*node)) continue;
      for (size_t r = 0; r < node->numResults(); ++r) {
        const Value& v = *node->result(r);
        // A view sharing its operand's bytes writes none: its readers are its operand's.
        if (v.type().bytes() == 0 || bytesOf(v) != &v) continue;
        const uint32_t w = writerOf(v);
        const int64_t off = plan_.of(*node).offsets[r];
        buffers.push_back({&v, node.get(), w, share_stream_[w] / 2, off, off + v.type().bytes()});
      }
      // After its results: the sweep then finds a workspace over its own results as such.
      if (const std::optional<WorkspacePlan>& ws = plan_.of(*node).workspace) {
        const uint32_t w = first_share_[node->id()];
        buffers.push_back(
            {nullptr, node.get(), w, share_stream_[w] / 2, ws->offset, ws->offset + ws->bytes});
      }
    }
    std::stable_sort(buffers.begin(), buffers.end(),
                     [](const Buffer& a, const Buffer& b) { return a.writer < b.writer; });
    returned_.clear();
    for (const Value* v : g_.outputs()) returned_.emplace(bytesOf(*v), v);
    std::vector<std::map<int64_t, Piece>> arenas(m_.devices().size());
    for (uint32_t b = 0; b < buffers.size(); ++b) {
      const Buffer& nb = buffers[b];
      std::map<int64_t, Piece>& arena = arenas[nb.device];
      auto it = arena.upper_bound(nb.begin);
      if (it != arena.begin() && std::prev(it)->second.end > nb.begin) --it;
      std::vector<std::pair<int64_t, Piece>> displaced;
      while (it != arena.end() && it->first < nb.end) {
        displaced.push_back(*it);
        it = arena.erase(it);
      }
      for (const auto& [begin, piece] : displaced) {
        const Buffer& old = buffers[piece.buffer];
        RETURN_IF_ERROR(
            checkReuse(old, nb, std::max(begin, nb.begin), std::min(piece.end, nb.end)));
        if (begin < nb.begin) arena[begin] = {nb.begin, piece.buffer};
        if (piece.end > nb.end) arena[nb.end] = {piece.end, piece.buffer};
      }
      arena[nb.begin] = {nb.end, b};
    }
    return absl::OkStatus();
  }

  absl::Status checkReuse(const Buffer& old, const Buffer& now, int64_t begin, int64_t end) {
    const Node& writer = *now.node;
    const std::string bytes = bytesOn(now.device, begin, end);
    // "writes %v" or "puts its workspace": what the later buffer's node does to the bytes.
    const std::string writes =
        now.value != nullptr ? absl::StrCat("writes %", now.value->name()) : "puts its workspace";
    if (old.writer == now.writer)
      return failAt(writer,
                    old.value != nullptr && now.value != nullptr
                        ? absl::StrCat("its results %", old.value->name(), " and %",
                                       now.value->name(), " share ", bytes)
                        : absl::StrCat("its workspace and its result ",
                                       nameOf(old.value != nullptr ? old : now), " share ", bytes));
    if (auto it = old.value != nullptr ? returned_.find(old.value) : returned_.end();
        it != returned_.end())
      return failAt(
          writer,
          absl::StrCat(writes, " over ", bytes, ", which hold %", old.value->name(),
                       it->second == old.value ? ", a value the graph returns"
                                               : absl::StrCat(", whose view %", it->second->name(),
                                                              " the graph returns"),
                       " (it must stay until the step ends)"));
    if (!before(old.writer, now.writer))
      return failAt(writer, absl::StrCat("and ", old.node->describe(), " may run at once (",
                                         onSlot(now.writer), " and ", onSlot(old.writer),
                                         ", no event orders them) and both write ", bytes, " (",
                                         nameOf(now), ", ", nameOf(old), ")"));
    // A workspace has no reader but its own node, which the check above ordered.
    if (old.value == nullptr) return absl::OkStatus();
    for (uint32_t r : last_readers_[numberOf(*old.value)]) {
      const Node& reader = *share_node_[r];
      if (r == now.writer)
        return failAt(writer, absl::StrCat(writes, " over ", bytes, ", which hold %",
                                           old.value->name(), " that it reads itself"));
      if (before(r, now.writer)) continue;
      if (before(now.writer, r))
        return failAt(
            writer, absl::StrCat(writes, " over ", bytes, " while %", old.value->name(),
                                 " still has a reader ", "after it: ", reader.describe(), " on ",
                                 onSlot(r), " (the bytes are released before their last reader)"));
      return failAt(
          writer, absl::StrCat("and ", reader.describe(), " may run at once (", onSlot(now.writer),
                               " and ", onSlot(r), ", no event orders them) and touch ", bytes,
                               " (", now.value != nullptr ? "it " + writes : "its workspace",
                               ", the other reads %", old.value->name(), ")"));
    }
    return absl::OkStatus();
  }

  const Graph& g_;
  const Module& m_;
  const GraphPlan& plan_;
  std::vector<uint32_t> position_;     // by node id
  std::vector<const Node*> by_id_;     // by node id
  std::vector<uint32_t> first_share_;  // by node id
  std::vector<const Node*> share_node_;
  std::vector<uint32_t> share_stream_;                          // device * 2 + (comm ? 1 : 0)
  std::vector<std::vector<uint32_t>> waits_;                    // by waiting share: writer shares
  std::vector<Clock> clock_;                                    // by share: as it completes
  std::vector<size_t> first_value_;                             // by node id
  std::vector<absl::InlinedVector<uint32_t, 2>> last_readers_;  // by value: one per stream
  std::vector<const Value*> bytes_of_;                          // by value number
  absl::flat_hash_map<const Value*, const Value*> returned_;    // bytes -> the returned value
};

}  // namespace

absl::Status verifyPlan(const Graph& g) {
  if (g.plan() == nullptr) return absl::OkStatus();
  return PlanVerifier(g).run();
}

}  // namespace tandem::ir
