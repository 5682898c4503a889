// tandem explore: the page holds the module's graph, plan, memory plan and trace as the
// other commands compute them (tandem dump's summary and memory report are the oracles),
// and loads nothing from the network. (explore_browser_test.cc opens it in Chromium.)

#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/cli_helpers.h"
#include "tests/tools/explore_layout.h"
#include "tools/tandem/explore/page_data.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

// The document the page's script reads, from the page.
json pageData(const std::string& html) {
  const std::string open = "id=\"tandem-data\">";
  const size_t at = html.find(open);
  if (at == std::string::npos) return json();
  const size_t end = html.find("</script>", at);
  return json::parse(html.substr(at + open.size(), end - at - open.size()), nullptr, false);
}

// Writes the page of `args` and returns its document.
json explore(const TempDir& dir, std::vector<std::string> args) {
  const std::string page = dir.file("page.html");
  args.insert(args.begin(), "explore");
  args.insert(args.end(), {"-o", page});
  const CommandResult r = runTandem(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  return pageData(readFile(page));
}

// "graph @train_step: 113 nodes" of `tandem dump --format summary`.
int64_t summaryNodeCount(const std::string& summary, const std::string& graph) {
  std::smatch m;
  const std::regex line("graph @" + graph + ": ([0-9]+) nodes");
  int64_t n = -1;
  if (std::regex_search(summary, m, line)) {
    EXPECT_TRUE(absl::SimpleAtoi(m[1].str(), &n));
  }
  return n;
}

TEST(ExplorePage, LoadsNothingFromTheNetwork) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir;
  const CommandResult r =
      runTandem({"explore", "--model", "lenet", "--devices", "2", "-o", dir.file("lenet.html")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = readFile(dir.file("lenet.html"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Everything inline, and a policy that forbids fetching anything else.
  EXPECT_TRUE(absl::StrContains(html, "content=\"default-src 'none'; script-src 'unsafe-inline'"));
  for (const char* external : {"<script src", "<link", "<img", "url(", "@import"})
    EXPECT_FALSE(absl::StrContains(html, external)) << external;
  // The layout library and the page's own script are in it.
  EXPECT_TRUE(absl::StrContains(html, "dagre"));
  EXPECT_TRUE(absl::StrContains(html, "tandem explore: the page's script"));
  EXPECT_TRUE(pageData(html).is_object());
}

TEST(ExplorePage, HoldsTheStepAndItsPlan) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir;
  const json d = explore(dir, {"--model", "lenet", "--devices", "2"});
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["module"], "lenet");
  EXPECT_EQ(d["graph"], "train_step");
  EXPECT_EQ(d["devices"], json({"cpu:0", "cpu:1"}));
  const CommandResult summary =
      runTandem({"dump", "--model", "lenet", "--devices", "2", "--format", "summary"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  const json& nodes = d["nodes"];
  ASSERT_EQ(static_cast<int64_t>(nodes["name"].size()),
            summaryNodeCount(summary.out, "train_step"));
  // Every node that runs has its stream (collectives on comm), its cost estimate and the
  // printer's attribute text.
  int comm = 0, compute = 0;
  for (size_t i = 0; i < nodes["name"].size(); ++i) {
    const std::string op = d["ops"][nodes["op"][i].get<int>()];
    const int stream = nodes["stream"][i];
    if (op == "input" || op == "param") {
      EXPECT_EQ(stream, -1) << op;
      continue;
    }
    const bool collective = d["collectives"].contains(std::to_string(i));
    EXPECT_EQ(stream, collective ? 1 : 0) << nodes["name"][i];
    (collective ? comm : compute)++;
    EXPECT_GE(nodes["estimate_us"][i].get<double>(), 0.0);
  }
  EXPECT_GT(comm, 0);
  EXPECT_GT(compute, 0);
  EXPECT_TRUE(absl::StrContains(d["attributes"].dump(), "{stride=1, pad=0}"));
  // The plan's waits: every gradient bucket's all_reduce is waited for by the updates.
  EXPECT_FALSE(d["waits"].empty());
  // Every convolution pass with a choice has the algorithm choose-algorithms planned for
  // it, and no other node has one (fuse-conv-relu-pool's pair has one way to run).
  EXPECT_EQ(d["plan"]["algorithms"], true);
  size_t convolutions = 0;
  for (size_t i = 0; i < nodes["name"].size(); ++i) {
    const std::string op = d["ops"][nodes["op"][i].get<int>()];
    const bool convolution =
        absl::StartsWith(op, "conv2d") && !absl::StartsWith(op, "conv2d_relu_avg_pool");
    convolutions += convolution;
    EXPECT_EQ(d["algorithms"].contains(std::to_string(i)), convolution) << nodes["name"][i];
  }
  EXPECT_EQ(convolutions, 6u);  // conv2's three passes, x 2 (conv1 is fused with pool1)
  for (const auto& [at, word] : d["algorithms"].items())
    EXPECT_TRUE(word == "plain" || word == "blocked" || word == "winograd" || word == "gemm" ||
                word == "taps")
        << at << ": " << word;
}

// The memory view's numbers are `tandem dump --memory`'s, and the peak the page finds in
// the buffers' lifetimes is the plan's live peak.
TEST(ExplorePage, MemoryIsTheMemoryPlan) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir;
  const json d = explore(dir, {"--model", "resnet18", "--devices", "4"});
  ASSERT_TRUE(d.contains("memory"));
  const CommandResult dump = runTandem(
      {"dump", "--model", "resnet18", "--devices", "4", "--memory", "--graph", "train_step"});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  std::map<std::string, std::pair<std::string, std::string>> reported;  // device -> arena, peak
  for (absl::string_view line : absl::StrSplit(dump.out, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() == 8 && cells[0] == "train_step")
      reported[cells[1]] = {cells[2] + " " + cells[3], cells[4] + " " + cells[5]};
  }
  ASSERT_EQ(reported.size(), 4u) << dump.out;
  auto mib = [](int64_t b) { return absl::StrFormat("%.2f MiB", b / 1048576.0); };
  for (const json& m : d["memory"]) {
    const std::string device = m["device"];
    EXPECT_EQ(mib(m["arena"]), reported[device].first) << device;
    EXPECT_EQ(mib(m["live_peak"]), reported[device].second) << device;
    EXPECT_EQ(m["peak_bytes"], m["live_peak"]) << device;
    // The buffers live at the peak add up to it, and none lies outside the arena.
    const json& b = m["buffers"];
    int64_t at_peak = 0;
    for (const json& k : m["peak_buffers"]) at_peak += b[k.get<size_t>() * 6 + 5].get<int64_t>();
    EXPECT_EQ(at_peak, m["live_peak"].get<int64_t>()) << device;
    for (size_t k = 0; k < b.size(); k += 6)
      EXPECT_LE(b[k + 4].get<int64_t>() + b[k + 5].get<int64_t>(), m["arena"].get<int64_t>());
  }
}

// Each gradient bucket names the parameters whose gradients it reduces: as many as
// `tandem dump --format summary` says it carries tensors, and every parameter once.
TEST(ExplorePage, BucketsNameTheirParameters) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir;
  const json d = explore(dir, {"--model", "resnet18", "--devices", "2"});
  const CommandResult summary =
      runTandem({"dump", "--model", "resnet18", "--devices", "2", "--format", "summary"});
  const CommandResult text = runTandem({"dump", "--model", "resnet18", "--devices", "2"});
  ASSERT_EQ(summary.exit_code, 0);
  std::map<int64_t, int64_t> tensors;  // bucket -> tensors, of the gradient buckets
  const std::regex bucket("all_reduce bucket ([0-9]+): ([0-9]+) tensors?,[^\n]*");
  for (std::sregex_iterator it(summary.out.begin(), summary.out.end(), bucket), end; it != end;
       ++it)
    if (!absl::StrContains(it->str(), "returned value"))
      tensors[std::stoll((*it)[1])] = std::stoll((*it)[2]);
  std::set<std::string> params, named;
  const std::regex var("var @([^ ]+) : [^\n]*role=param");
  for (std::sregex_iterator it(text.out.begin(), text.out.end(), var), end; it != end; ++it)
    params.insert((*it)[1]);
  ASSERT_FALSE(tensors.empty());
  ASSERT_FALSE(params.empty());
  for (const auto& [pos, c] : d["collectives"].items()) {
    if (c["kind"] != "reduce" || !tensors.contains(c["bucket"].get<int64_t>())) continue;
    EXPECT_EQ(static_cast<int64_t>(c["parameters"].size()), tensors[c["bucket"].get<int64_t>()])
        << c.dump();
    EXPECT_EQ(c["tensors"], tensors[c["bucket"].get<int64_t>()]);
    for (const json& p : c["parameters"]) EXPECT_TRUE(named.insert(p).second) << p;
  }
  EXPECT_EQ(named, params);
}

// Sync batch norm all-reduces each layer's statistics: those collectives have buckets
// too, but no parameter, and every parameter is still named once, by its gradient's.
TEST(ExplorePage, SyncBatchNormStatisticsServeNoParameter) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir;
  const json d = explore(dir, {"--model", "resnet18", "--devices", "2", "--sync-bn"});
  const CommandResult summary = runTandem(
      {"dump", "--model", "resnet18", "--devices", "2", "--sync-bn", "--format", "summary"});
  std::set<int64_t> statistics;  // "all_reduce bucket 5: 1 tensor, ..., first %stem.conv.stats.0"
  const std::regex stats("all_reduce bucket ([0-9]+): [^\n]*first %[^ \n]*\\.stats\\.0");
  for (std::sregex_iterator it(summary.out.begin(), summary.out.end(), stats), end; it != end; ++it)
    statistics.insert(std::stoll((*it)[1]));
  ASSERT_GT(statistics.size(), 10u) << summary.out;
  std::set<std::string> named;
  for (const auto& [pos, c] : d["collectives"].items()) {
    if (!c.contains("bucket")) continue;
    if (statistics.contains(c["bucket"].get<int64_t>())) {
      EXPECT_TRUE(c["parameters"].empty()) << c.dump();
    }
    for (const json& p : c["parameters"]) EXPECT_TRUE(named.insert(p).second) << p;
  }
  const CommandResult text = runTandem({"dump", "--model", "resnet18", "--devices", "2"});
  std::set<std::string> params;
  const std::regex var("var @([^ ]+) : [^\n]*role=param");
  for (std::sregex_iterator it(text.out.begin(), text.out.end(), var), end; it != end; ++it)
    params.insert((*it)[1]);
  EXPECT_EQ(named, params);
}

TEST(ExplorePage, AModuleFileIsExploredAsCompiled) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir;
  const std::string tir = dir.file("lenet.tir");
  ASSERT_EQ(runTandem({"dump", "--model", "lenet", "--devices", "2", "-o", tir}).exit_code, 0);
  const json from_model = explore(dir, {"--model", "lenet", "--devices", "2"});
  const json from_file = explore(dir, {"--module", tir});
  EXPECT_EQ(from_file["nodes"]["name"], from_model["nodes"]["name"]);
  EXPECT_EQ(from_file["memory"], from_model["memory"]);
  EXPECT_EQ(from_file["source"], "--module " + tir);
}

TEST(ExplorePage, AModuleNotYetReplicatedIsOneLane) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir;
  const json d = explore(dir, {"--model", "lenet", "--after", "autodiff"});
  EXPECT_EQ(d["devices"], json::array());
  EXPECT_FALSE(d.contains("memory"));
  for (const json& dev : d["nodes"]["device"]) EXPECT_EQ(dev, -1);
}

runtime::TraceSpan span(size_t device, int stream, double start, double end) {
  return {.device = device, .stream = stream, .start_us = start, .dur_us = end - start};
}

// Exposed communication: what of the comm slices no compute slice of the same device
// covers.
TEST(ExploreExposed, CommLessTheComputeOfItsDevice) {
  const std::vector<runtime::TraceSpan> spans = {
      span(0, 0, 0, 100),   span(0, 0, 120, 150),  // compute on device 0
      span(0, 1, 50, 200),                         // comm: exposed 100-120 and 150-200
      span(0, 2, 0, 300),                          // a prefetch copy: neither
      span(1, 1, 10, 20),                          // device 1: no compute, all exposed
      span(1, 0, 500, 600),
  };
  const std::vector<tools::explore::ExposedSpan> exposed =
      tools::explore::exposedCommunication(spans, 2);
  ASSERT_EQ(exposed.size(), 3u);
  EXPECT_EQ(exposed[0].device, 0u);
  EXPECT_EQ(exposed[0].start_us, 100);
  EXPECT_EQ(exposed[0].end_us, 120);
  EXPECT_EQ(exposed[1].start_us, 150);
  EXPECT_EQ(exposed[1].end_us, 200);
  EXPECT_EQ(exposed[2].device, 1u);
  EXPECT_EQ(exposed[2].start_us, 10);
  EXPECT_EQ(exposed[2].end_us, 20);
  // A comm slice wholly under compute is not exposed.
  EXPECT_TRUE(
      tools::explore::exposedCommunication({span(0, 0, 0, 10), span(0, 1, 2, 8)}, 1).empty());
}

// A training run's trace and metrics: every slice of the trace is on the page, with the
// run's per-epoch figures.
TEST(ExplorePage, TraceAndMetricsOfATrainingRun) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  TempDir dir, data;
  writeIdxSplit(data, "train", 160);
  writeIdxSplit(data, "t10k", 32);
  const std::string trace = dir.file("trace.json"), metrics = dir.file("metrics.csv");
  const CommandResult train =
      runTandem({"train", "--model", "lenet", "--devices", "2", "--batch", "32", "--epochs", "2",
                 "--data", data.file(""), "--trace", trace, "--metrics", metrics});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const json d = explore(dir, {"--model", "lenet", "--devices", "2", "--batch", "32", "--trace",
                               trace, "--metrics", metrics});
  ASSERT_TRUE(d.contains("trace"));
  const json written = json::parse(readFile(trace));
  size_t slices = 0;
  for (const json& e : written["traceEvents"]) slices += e["ph"] == "X";
  EXPECT_EQ(d["trace"]["spans"].size(), 6 * slices);
  EXPECT_EQ(d["trace"]["steps"], 3);  // train --trace's default
  for (const json& p : d["trace"]["per_device"]) {
    EXPECT_GT(p["compute_us"].get<double>(), 0);
    EXPECT_LE(p["exposed_us"].get<double>(), p["comm_us"].get<double>() + 1e-6);
  }
  ASSERT_EQ(d["metrics"].size(), 2u);
  EXPECT_EQ(d["metrics"][0][0], 1);
  EXPECT_EQ(d["metrics"][1][0], 2);
}

}  // namespace
}  // namespace tandem::testing
