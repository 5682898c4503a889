#include "runtime/chrome_trace.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/placement.h"
#include "nlohmann/json.hpp"

namespace tandem::runtime {
namespace {

using nlohmann::json;

// The thread id of a stream in the trace: compute above comm, as `dump --format streams`,
// and the input pipeline's prefetch stream below them.
int chromeThreadOf(bool comm) { return comm ? 1 : 0; }
int chromeThreadOf(const TraceEntry& e) { return e.prefetch ? 2 : chromeThreadOf(e.comm); }
const char* chromeStreamName(int tid) {
  return tid == 2 ? "prefetch" : tid == 1 ? "comm" : "compute";
}

// Bytes a share writes: the node's results that live on the share's device (a collective
// has results on every device it spans).
int64_t chromeShareBytes(const ir::Module& m, const ir::Node& n, size_t device) {
  int64_t bytes = 0;
  for (size_t i = 0; i < n.numResults(); ++i)
    if (ir::deviceIndexOfValue(m, *n.result(i)) == device) bytes += n.result(i)->type().bytes();
  return bytes;
}

}  // namespace

std::string chromeTrace(const ir::Module& m, absl::Span<const TraceEntry> entries,
                        absl::Span<const ir::StreamWait> waits) {
  json events = json::array();
  for (size_t d = 0; d < m.devices().size(); ++d) {
    const int pid = static_cast<int>(d);
    events.push_back(json{{"ph", "M"},
                          {"name", "process_name"},
                          {"pid", pid},
                          {"args", {{"name", ir::toString(m.devices()[d])}}}});
    events.push_back(json{{"ph", "M"},
                          {"name", "process_sort_index"},
                          {"pid", pid},
                          {"args", {{"sort_index", pid}}}});
    // The prefetch thread only where the trace has copies on it (devices with the stream).
    const bool prefetches = std::any_of(entries.begin(), entries.end(), [&](const TraceEntry& e) {
      return e.prefetch && e.device == d;
    });
    for (int tid = 0; tid < (prefetches ? 3 : 2); ++tid) {
      events.push_back(json{{"ph", "M"},
                            {"name", "thread_name"},
                            {"pid", pid},
                            {"tid", tid},
                            {"args", {{"name", chromeStreamName(tid)}}}});
      events.push_back(json{{"ph", "M"},
                            {"name", "thread_sort_index"},
                            {"pid", pid},
                            {"tid", tid},
                            {"args", {{"sort_index", tid}}}});
    }
  }

  int64_t origin = INT64_MAX;
  for (const TraceEntry& e : entries) origin = std::min(origin, e.start_ns);
  auto us = [origin](double ns) { return (ns - static_cast<double>(origin)) / 1000.0; };
  // Inside the slice, so that both viewers bind an arrow's end to it (an end exactly on
  // a slice's edge may bind to its neighbour).
  auto middle = [&](const TraceEntry& e) { return us(0.5 * double(e.start_ns + e.end_ns)); };

  // The runs of each (node, device, stream), in issue order: run k of a wait's consumer
  // pairs with run k of its producer. A prefetch copy is no node's run on a step stream.
  using Key = std::tuple<const ir::Node*, size_t, int>;
  std::map<Key, std::vector<const TraceEntry*>> runs;
  for (const TraceEntry& e : entries) {
    const int tid = chromeThreadOf(e);
    std::vector<const TraceEntry*>& list = runs[{e.node, e.device, tid}];
    events.push_back(
        json{{"ph", "X"},
             {"name", e.prefetch ? absl::StrCat("prefetch: ", ir::describeWork(*e.node))
                                 : ir::describeWork(*e.node)},
             {"cat", chromeStreamName(tid)},
             {"pid", static_cast<int>(e.device)},
             {"tid", tid},
             {"ts", us(double(e.start_ns))},
             {"dur", (e.end_ns - e.start_ns) / 1000.0},
             {"args",
              {{"op", std::string(e.node->opName())},
               {"scope", e.node->scope()},
               {"node", e.node->describe()},
               {"bytes", chromeShareBytes(m, *e.node, e.device)},
               {"step", list.size()}}}});
    list.push_back(&e);
  }

  int64_t flow_id = 0;
  for (const ir::StreamWait& w : waits) {
    const bool from_comm = w.from.stream == ir::StreamKind::kComm;
    const bool at_comm = w.at.stream == ir::StreamKind::kComm;
    auto producers = runs.find({w.producer, w.from.device, chromeThreadOf(from_comm)});
    auto consumers = runs.find({w.consumer, w.at.device, chromeThreadOf(at_comm)});
    if (producers == runs.end() || consumers == runs.end()) continue;
    const size_t steps = std::min(producers->second.size(), consumers->second.size());
    const std::string name =
        absl::StrCat("wait ", ir::slotName(m, w.at), " after ", ir::slotName(m, w.from));
    for (size_t k = 0; k < steps; ++k) {
      ++flow_id;
      events.push_back(json{{"ph", "s"},
                            {"id", flow_id},
                            {"name", name},
                            {"cat", "wait"},
                            {"pid", static_cast<int>(w.from.device)},
                            {"tid", chromeThreadOf(from_comm)},
                            {"ts", middle(*producers->second[k])},
                            {"bp", "e"}});
      events.push_back(json{{"ph", "f"},
                            {"id", flow_id},
                            {"name", name},
                            {"cat", "wait"},
                            {"pid", static_cast<int>(w.at.device)},
                            {"tid", chromeThreadOf(at_comm)},
                            {"ts", middle(*consumers->second[k])},
                            {"bp", "e"}});
    }
  }
  json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  // Scopes and names are the model author's text: bytes that are not UTF-8 are replaced
  // rather than failing the run.
  return trace.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace tandem::runtime
