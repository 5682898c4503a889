#include "runtime/chrome_trace.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

namespace tandem::runtime {
namespace {

// Node::describe() less ", at LOCATION": the source lines of a model may move between the
// build that traced and the one that reads.
std::string withoutLocation(absl::string_view described) {
  const size_t at = described.rfind(", at ");
  if (at == absl::string_view::npos) return std::string(described);
  return absl::StrCat(described.substr(0, at), ")");
}

std::string deviceNames(const std::vector<std::string>& names) {
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}

}  // namespace

absl::StatusOr<std::vector<TraceSpan>> readChromeTrace(const ir::Module& m, const ir::Graph& g,
                                                       absl::string_view json_text) {
  constexpr const char* kNotOurs = "not a step trace that Tandem wrote";
  json trace;
  try {
    trace = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, ...": the part after the tag.
    std::string what = e.what();
    if (const size_t tag = what.find("] "); tag != std::string::npos) what = what.substr(tag + 2);
    return absl::InvalidArgumentError(absl::StrCat("is not JSON: ", what));
  }
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return absl::InvalidArgumentError(
        absl::StrCat("is not a Chrome trace (no \"traceEvents\" array): ", kNotOurs));
  const json& events = trace["traceEvents"];

  // The devices: one process per device, named by its process_name metadata.
  std::map<int64_t, std::string> process_names;
  for (const json& e : events)
    if (e.is_object() && e.value("ph", "") == "M" && e.value("name", "") == "process_name" &&
        e.contains("pid") && e["pid"].is_number_integer() && e.contains("args") &&
        e["args"].is_object() && e["args"].contains("name") && e["args"]["name"].is_string())
      process_names[e["pid"].get<int64_t>()] = e["args"]["name"].get<std::string>();
  std::vector<std::string> traced, module_devices;
  for (const auto& [pid, name] : process_names) traced.push_back(name);
  for (const ir::Device& d : m.devices()) module_devices.push_back(ir::toString(d));
  if (traced.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("names no device (no process_name metadata): ", kNotOurs));
  if (traced.size() != module_devices.size())
    return absl::InvalidArgumentError(
        absl::StrCat("is a trace of ", traced.size(), traced.size() == 1 ? " device " : " devices ",
                     deviceNames(traced), ", the module runs on ", module_devices.size(), " ",
                     deviceNames(module_devices)));
  size_t index = 0;
  for (const auto& [pid, name] : process_names) {
    if (pid != static_cast<int64_t>(index))
      return absl::InvalidArgumentError(absl::StrCat("numbers its devices ", deviceNames(traced),
                                                     " other than 0 to ", traced.size() - 1, ": ",
                                                     kNotOurs));
    if (name != module_devices[index])
      return absl::InvalidArgumentError(absl::StrCat("its device ", index, " is ", name,
                                                     ", the module's is ", module_devices[index]));
    ++index;
  }

  absl::flat_hash_map<std::string, const ir::Node*> nodes;
  for (const auto& n : g.nodes()) nodes.emplace(withoutLocation(n->describe()), n.get());
  std::vector<TraceSpan> spans;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    auto number = [&](const char* key) { return e.contains(key) && e[key].is_number(); };
    if (!number("pid") || !number("tid") || !number("ts") || !number("dur") ||
        !e.contains("args") || !e["args"].is_object() || !e["args"].contains("node") ||
        !e["args"]["node"].is_string())
      return absl::InvalidArgumentError(absl::StrCat(
          "event ", i, " is a slice without pid, tid, ts, dur or args.node: ", kNotOurs));
    const int64_t pid = e["pid"].get<int64_t>(), tid = e["tid"].get<int64_t>();
    const std::string described = e["args"]["node"].get<std::string>();
    if (pid < 0 || pid >= static_cast<int64_t>(module_devices.size()) || tid < 0 || tid > 2)
      return absl::InvalidArgumentError(absl::StrCat("its slice of ", described, " is on process ",
                                                     pid, ", thread ", tid, ": ", kNotOurs));
    auto it = nodes.find(withoutLocation(described));
    if (it == nodes.end())
      return absl::InvalidArgumentError(absl::StrCat("its slice of ", withoutLocation(described),
                                                     " is no node of @", g.name(), " of ", m.name(),
                                                     ": a trace of another module"));
    const ir::Node* n = it->second;
    if (n->device() && ir::toString(*n->device()) != module_devices[pid])
      return absl::InvalidArgumentError(absl::StrCat("its slice of ", described, " is on ",
                                                     module_devices[pid],
                                                     ": a trace of another module"));
    // The same node at another batch, precision or split writes other bytes.
    const auto device = static_cast<size_t>(pid);
    if (const json& args = e["args"]; args.contains("bytes") && args["bytes"].is_number_integer())
      if (const int64_t traced = args["bytes"].get<int64_t>(),
          own = chromeShareBytes(m, *n, device);
          traced != own)
        return absl::InvalidArgumentError(
            absl::StrCat("its slice of ", described, " on ", module_devices[device], " writes ",
                         traced, " bytes, the module's writes ", own,
                         " bytes: a trace of another batch, split or precision"));
    const json& step = e["args"].contains("step") ? e["args"]["step"] : json(0);
    spans.push_back(TraceSpan{.node = n,
                              .device = device,
                              .stream = static_cast<int>(tid),
                              .step = step.is_number_integer() ? step.get<int64_t>() : 0,
                              .start_us = e["ts"].get<double>(),
                              .dur_us = e["dur"].get<double>()});
  }
  if (spans.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("has no slices (\"ph\": \"X\" events): ", kNotOurs));
  return spans;
}

}  // namespace tandem::runtime
