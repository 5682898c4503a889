#include "ir/plan.h"

#include <bit>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/interfaces.h"
#include "ir/op_info.h"
#include "ir/op_views.h"

namespace tandem::ir {
namespace {

// A 64-bit hash over 8-byte words: FNV-1a's xor-multiply a word at a time (each step a
// bijection of the state, so any one changed word changes the result) with splitmix64's
// finish to spread the bits. Not a library's: absl::Hash is seeded per process (a printed
// fingerprint must read back the same in another one), and zlib's crc32 is 32 bits and
// byte-at-a-time, slow on the millions of nodes of a 4096-device module.
class Hasher {
 public:
  void word(uint64_t w) { h_ = (h_ ^ w) * 0x100000001b3ull; }
  void text(absl::string_view s) {
    word(s.size());
    for (size_t i = 0; i < s.size(); i += 8) {
      uint64_t w = 0;
      std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
      word(w);
    }
  }
  uint64_t value() const {
    uint64_t z = h_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

constexpr uint64_t kNowhere = ~uint64_t{0};

// The hash of each op's name, by Op: the fingerprint hashes ops as their text spells
// them, so that it stays valid when the op table grows, without hashing a string per node.
const std::vector<uint64_t>& opNameHashes() {
  static const std::vector<uint64_t>* hashes = [] {
    auto* out = new std::vector<uint64_t>;
    for (const OpInfo& info : allOps()) {
      Hasher h;
      h.text(info.name);
      out->push_back(h.value());
    }
    return out;
  }();
  return *hashes;
}

uint64_t dtypeNameHash(DType t) {
  Hasher h;
  h.text(dtypeName(t));
  return h.value();
}

}  // namespace

int64_t GraphPlan::offset(const Value& v) const {
  const NodePlan& p = nodes[v.def()->id()];
  const size_t r = static_cast<size_t>(v.index());
  return r < p.offsets.size() ? p.offsets[r] : kNoOffset;
}

ActivationLayout GraphPlan::layout(const Value& v) const {
  const size_t id = v.def()->id();
  return id < nodes.size() ? nodes[id].layout(static_cast<size_t>(v.index()))
                           : ActivationLayout::kPlain;
}

absl::string_view planPartName(PlanPart p) {
  switch (p) {
    case PlanPart::kStreams:
      return "streams";
    case PlanPart::kEvents:
      return "events";
    case PlanPart::kLayouts:
      return "layouts";
    case PlanPart::kAlgorithms:
      return "algorithms";
    case PlanPart::kMemory:
      return "memory";
  }
  return "?";
}

uint64_t graphFingerprint(const Graph& g) {
  return graphFingerprint(g, [](const Node&) {});
}

uint64_t graphFingerprint(const Graph& g, absl::FunctionRef<void(const Node&)> visit) {
  const Module& m = *g.module();
  const std::vector<uint64_t>& op_hashes = opNameHashes();
  static const uint64_t dtype_hashes[] = {dtypeNameHash(DType::kF32), dtypeNameHash(DType::kBF16),
                                          dtypeNameHash(DType::kI32), dtypeNameHash(DType::kF64),
                                          dtypeNameHash(DType::kI64)};
  DeviceIndexCache index(m);
  auto device = [&](const Device& d) -> uint64_t {
    std::optional<size_t> i = index(d);
    return i ? *i : kNowhere;
  };
  // Operands by their definer's position, filled in as the sweep reaches each node (an
  // operand's definer comes before it): each node is visited once, and a visit, a walk
  // through the graph's pointers, is most of what hashing a large graph costs. A graph out
  // of order (which the verifier refuses) is hashed again with every position known first.
  constexpr uint32_t kUnseen = ~uint32_t{0};
  std::vector<uint32_t> position(g.idBound(), kUnseen);
  bool out_of_order = false;
  auto hashAll = [&](bool first_time) {
    auto ref = [&](const Value& v) {
      const uint32_t p = position[v.def()->id()];
      out_of_order |= p == kUnseen;
      return (uint64_t{p} << 32) | static_cast<uint32_t>(v.index());
    };
    Hasher h;
    h.word(m.devices().size());
    for (const Device& d : m.devices()) h.text(toString(d));
    // Ops and dtypes by the words the text spells them with, attributes by value (device
    // lists by module position), not by enum values or variant indices: a fingerprint
    // printed in a file stays valid when the op table or the attribute kinds grow.
    h.word(g.numNodes());
    for (size_t i = 0; i < g.numNodes(); ++i) {
      const Node& n = *g.nodes()[i];
      if (first_time) {
        position[n.id()] = static_cast<uint32_t>(i);
        visit(n);
      }
      h.word(op_hashes[static_cast<size_t>(n.op())]);
      h.word(n.device() ? device(*n.device()) : kNowhere);
      h.word(n.numOperands());
      for (const Value* v : n.operands()) h.word(ref(*v));
      h.word(n.numResults());
      for (size_t r = 0; r < n.numResults(); ++r) {
        const TensorType& t = n.result(r)->type();
        h.word(dtype_hashes[static_cast<size_t>(t.dtype)]);
        h.word(t.shape.size());
        for (int64_t d : t.shape) h.word(static_cast<uint64_t>(d));
      }
      h.word(n.attrs().size());
      for (const AttrValue& a : n.attrs())
        std::visit(
            [&](const auto& x) {
              using T = std::decay_t<decltype(x)>;
              if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, bool>) {
                h.word(static_cast<uint64_t>(x));
              } else if constexpr (std::is_same_v<T, double>) {
                h.word(std::bit_cast<uint64_t>(x));
              } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                h.word(x.size());
                for (int64_t i : x) h.word(static_cast<uint64_t>(i));
              } else if constexpr (std::is_same_v<T, Symbol>) {
                h.text(x.name);
              } else if constexpr (std::is_same_v<T, EnumWord>) {
                h.text(x.word);
              } else {
                h.word(x.size());
                for (const Device& d : x) h.word(device(d));
              }
            },
            a);
    }
    h.word(g.outputs().size());
    for (const Value* v : g.outputs()) h.word(ref(*v));
    return h.value();
  };
  const uint64_t hash = hashAll(true);
  if (!out_of_order) return hash;
  std::fill(position.begin(), position.end(), 0);
  for (size_t i = 0; i < g.numNodes(); ++i) position[g.nodes()[i]->id()] = static_cast<uint32_t>(i);
  return hashAll(false);
}

bool viewCanShareBytes(const Node& n) {
  if (!isView(n.op()) || n.numOperands() < 1 || n.numResults() != 1) return false;
  const Value& x = *n.operand(0);
  const Value& y = *n.result(0);
  return !isSource(x.def()->op()) && x.type().bytes() == y.type().bytes() &&
         deviceOfValue(x) == deviceOfValue(y);
}

bool viewSharesBytes(const GraphPlan& plan, const Node& n) {
  if (!viewCanShareBytes(n)) return false;
  const Value& x = *n.operand(0);
  const auto& xs = plan.of(*x.def()).offsets;
  const auto& ys = plan.of(n).offsets;
  const size_t at = static_cast<size_t>(x.index());
  return ys.size() == 1 && at < xs.size() && ys[0] == xs[at] && ys[0] != GraphPlan::kNoOffset;
}

absl::Status requirePlanPart(const Graph& g, PlanPart part, absl::string_view pass) {
  const GraphPlan* plan = g.plan();
  if (plan != nullptr && plan->has(part)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "graph @", g.name(), " has no ", planPartName(part), " in its plan: run ", pass, " first"));
}

absl::Status checkPlanFresh(const Graph& g) {
  const GraphPlan* plan = g.plan();
  if (plan == nullptr) return absl::OkStatus();
  if (const uint64_t now = graphFingerprint(g); now != plan->fingerprint)
    return absl::FailedPreconditionError(absl::StrFormat(
        "the plan of graph @%s is stale: it was made for fingerprint %016x, the graph now has "
        "%016x (it changed after the plan was made): run assign-streams and the plan passes "
        "after the last rewrite",
        g.name(), plan->fingerprint, now));
  return absl::OkStatus();
}

absl::Status checkPlanFor(const Graph& g, PlanPart part, absl::string_view pass) {
  if (absl::Status s = requirePlanPart(g, part, pass); !s.ok()) return s;
  return checkPlanFresh(g);
}

std::vector<StreamWait> streamWaits(const Module& m, const Graph& g) {
  std::vector<StreamWait> out;
  const GraphPlan* plan = g.plan();
  if (plan == nullptr || !plan->has(PlanPart::kEvents)) return out;
  std::vector<const Node*> by_id(g.idBound(), nullptr);
  for (const auto& n : g.nodes()) by_id[n->id()] = n.get();
  // Which devices run a share of the node at hand: one sweep per node, so that a
  // collective over thousands of devices resolves each of its waits in O(1).
  std::vector<bool> runs(m.devices().size(), false);
  for (const auto& node : g.nodes()) {
    const NodePlan& p = plan->of(*node);
    if (p.waits.empty()) continue;
    std::vector<size_t> shares = sharesOf(m, *node);
    for (size_t d : shares) runs[d] = true;
    for (const ValueRef& r : p.waits) {
      const Node* producer = r.node < by_id.size() ? by_id[r.node] : nullptr;
      if (producer == nullptr || r.result >= producer->numResults()) continue;
      std::optional<size_t> from = deviceIndexOfValue(m, *producer->result(r.result));
      if (!from) continue;
      std::optional<size_t> at = shares.size() == 1
                                     ? std::optional<size_t>(shares[0])
                                     : (runs[*from] ? from : std::optional<size_t>());
      if (!at) continue;
      const NodePlan& q = plan->of(*producer);
      if (!p.stream || !q.stream) continue;
      out.push_back({node.get(), {*at, *p.stream}, producer, {*from, *q.stream}});
    }
    for (size_t d : shares) runs[d] = false;
  }
  return out;
}

std::string describeWork(const Node& n) {
  std::string what(n.opName());
  if (auto c = CollectiveView::of(n); c && c->bucket()) {
    absl::StrAppend(&what, " bucket ", *c->bucket());
  } else if (streamOf(n) == StreamKind::kComm) {
    absl::StrAppend(&what, " %", n.operand(0)->name());
  } else if (n.numResults() > 0) {
    absl::StrAppend(&what, " -> %", n.result(0)->name());
  } else if (n.numOperands() > 0) {
    absl::StrAppend(&what, " %", n.operand(0)->name());
  }
  return what;
}

absl::string_view streamName(StreamKind s) { return s == StreamKind::kComm ? "comm" : "compute"; }

std::string slotName(const Module& m, const StreamSlot& s) {
  return absl::StrCat(toString(m.devices()[s.device]), "/", streamName(s.stream));
}

std::string printStreams(const Module& m, const Graph& g) {
  // Dense number of a stream: two per device.
  auto slotIndex = [](const StreamSlot& s) {
    return s.device * 2 + (s.stream == StreamKind::kComm ? 1 : 0);
  };
  // One sweep files every node under the streams it runs on and every wait under its
  // consumer's share, so printing is linear in the graph however many devices it spans.
  const GraphPlan& plan = *g.plan();
  std::vector<std::vector<const Node*>> runs(m.devices().size() * 2);
  for (const auto& node : g.nodes())
    for (size_t d : sharesOf(m, *node)) {
      auto& run = runs[slotIndex({d, plan.of(*node).stream.value_or(StreamKind::kCompute)})];
      if (run.empty() || run.back() != node.get()) run.push_back(node.get());
    }
  absl::flat_hash_map<std::pair<const Node*, size_t>, std::vector<const StreamWait*>> waits_at;
  const std::vector<StreamWait> waits = streamWaits(m, g);
  for (const StreamWait& w : waits) waits_at[{w.consumer, slotIndex(w.at)}].push_back(&w);
  std::string out;
  for (size_t d = 0; d < m.devices().size(); ++d)
    for (StreamKind kind : {StreamKind::kCompute, StreamKind::kComm}) {
      const StreamSlot slot{d, kind};
      absl::StrAppend(&out, "stream ", slotName(m, slot), " of @", g.name(), ":\n");
      for (const Node* node : runs[slotIndex(slot)]) {
        if (auto it = waits_at.find({node, slotIndex(slot)}); it != waits_at.end())
          for (const StreamWait* w : it->second)
            absl::StrAppend(&out, "    wait ", slotName(m, w->from), " after ",
                            describeWork(*w->producer), "\n");
        absl::StrAppend(&out, "  ", describeWork(*node), "\n");
      }
    }
  return out;
}

}  // namespace tandem::ir
