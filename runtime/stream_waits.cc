#include "runtime/stream_waits.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"

namespace tandem::runtime {
namespace {

using ir::StreamKind;

// Dense number of a stream: two per device.
size_t slotIndex(const StreamSlot& s) {
  return s.device * 2 + (s.stream == StreamKind::kComm ? 1 : 0);
}

}  // namespace

std::vector<size_t> sharesOf(const ir::Module& m, const ir::Node& n) {
  if (n.op() == ir::Op::kInput || n.op() == ir::Op::kParam) return {};
  if (ir::streamOf(n) == StreamKind::kCompute) return {*m.deviceIndex(*n.device())};
  std::vector<size_t> out;
  for (const ir::Device& d : ir::CollectiveView(n).devices()) out.push_back(*m.deviceIndex(d));
  return out;
}

std::vector<const ir::Value*> readsOf(const ir::Module& m, const ir::Node& n, size_t k) {
  if (ir::streamOf(n) == StreamKind::kCompute) return {n.operands().begin(), n.operands().end()};
  const ir::CollectiveView c(n);
  const ir::IndexRange in = c.readsAt(k);
  // A group's sources are read by the share on their device (the root) only.
  if (c.info().reads == ir::CollectiveReads::kGroupSource &&
      ir::deviceIndexOfValue(m, *n.operand(in.begin)) != m.deviceIndex(c.devices()[k]))
    return {};
  return {n.operands().begin() + static_cast<ptrdiff_t>(in.begin),
          n.operands().begin() + static_cast<ptrdiff_t>(in.end)};
}

std::vector<StreamWait> streamWaits(const ir::Module& m, const ir::Graph& g) {
  // Who writes each value: the share whose device holds it, and the writer's position.
  struct Writer {
    StreamSlot slot;
    size_t pos;
  };
  absl::flat_hash_map<const ir::Value*, Writer> writer;
  // The last position of each stream that another stream already waits for: a stream is
  // a FIFO, so waiting for a later node of it covers every earlier one.
  auto key = [&](const StreamSlot& at, const StreamSlot& from) {
    return slotIndex(at) * m.devices().size() * 2 + slotIndex(from);
  };
  absl::flat_hash_map<size_t, size_t> waited_up_to;
  std::vector<StreamWait> waits;
  for (size_t pos = 0; pos < g.numNodes(); ++pos) {
    const ir::Node& n = *g.nodes()[pos];
    const StreamKind kind = ir::streamOf(n);
    std::vector<size_t> shares = sharesOf(m, n);
    for (size_t k = 0; k < shares.size(); ++k) {
      const StreamSlot at{shares[k], kind};
      // The latest writer this share reads on each other stream.
      absl::flat_hash_map<size_t, std::pair<Writer, const ir::Node*>> latest;
      for (const ir::Value* v : readsOf(m, n, k)) {
        auto it = writer.find(v);
        if (it == writer.end() || it->second.slot == at) continue;
        auto& l = latest[key(at, it->second.slot)];
        if (l.second == nullptr || it->second.pos > l.first.pos) l = {it->second, v->def()};
      }
      std::vector<std::pair<size_t, StreamWait>> found;
      for (const auto& [k2, l] : latest) {
        auto done = waited_up_to.find(k2);
        if (done != waited_up_to.end() && done->second >= l.first.pos) continue;
        waited_up_to[k2] = l.first.pos;
        found.push_back({l.first.pos, StreamWait{&n, at, l.second, l.first.slot}});
      }
      std::sort(found.begin(), found.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& f : found) waits.push_back(f.second);
    }
    for (size_t r = 0; r < n.numResults() && !shares.empty(); ++r) {
      const ir::Value* v = n.result(r);
      StreamSlot slot{kind == StreamKind::kCompute ? shares[0] : *ir::deviceIndexOfValue(m, *v),
                      kind};
      writer[v] = {slot, pos};
    }
  }
  return waits;
}

std::string describeWork(const ir::Node& n) {
  std::string what(n.opName());
  if (ir::AllReduceView::is(n)) {
    absl::StrAppend(&what, " bucket ", ir::AllReduceView(n).bucket());
  } else if (ir::streamOf(n) == StreamKind::kComm) {
    absl::StrAppend(&what, " %", n.operand(0)->name());
  } else if (n.numResults() > 0) {
    absl::StrAppend(&what, " -> %", n.result(0)->name());
  } else if (n.numOperands() > 0) {
    absl::StrAppend(&what, " %", n.operand(0)->name());
  }
  return what;
}

std::string slotName(const ir::Module& m, const StreamSlot& s) {
  return absl::StrCat(ir::toString(m.devices()[s.device]), "/",
                      s.stream == StreamKind::kComm ? "comm" : "compute");
}

std::string printStreams(const ir::Module& m, const ir::Graph& g) {
  // One sweep files every node under the streams it runs on and every wait under its
  // consumer's share, so printing is linear in the graph however many devices it spans.
  std::vector<std::vector<const ir::Node*>> runs(m.devices().size() * 2);
  for (const auto& node : g.nodes())
    for (size_t d : sharesOf(m, *node)) {
      auto& run = runs[slotIndex({d, ir::streamOf(*node)})];
      if (run.empty() || run.back() != node.get()) run.push_back(node.get());
    }
  absl::flat_hash_map<std::pair<const ir::Node*, size_t>, std::vector<const StreamWait*>> waits_at;
  const std::vector<StreamWait> waits = streamWaits(m, g);
  for (const StreamWait& w : waits) waits_at[{w.consumer, slotIndex(w.at)}].push_back(&w);
  std::string out;
  for (size_t d = 0; d < m.devices().size(); ++d)
    for (StreamKind kind : {StreamKind::kCompute, StreamKind::kComm}) {
      const StreamSlot slot{d, kind};
      absl::StrAppend(&out, "stream ", slotName(m, slot), " of @", g.name(), ":\n");
      for (const ir::Node* node : runs[slotIndex(slot)]) {
        if (auto it = waits_at.find({node, slotIndex(slot)}); it != waits_at.end())
          for (const StreamWait* w : it->second)
            absl::StrAppend(&out, "    wait ", slotName(m, w->from), " after ",
                            describeWork(*w->producer), "\n");
        absl::StrAppend(&out, "  ", describeWork(*node), "\n");
      }
    }
  return out;
}

}  // namespace tandem::runtime
