// tandem explore's page in a real browser: headless Chromium opens it from a file:// URL
// with name resolution off, runs its scripts and the clicks named in the URL (the page's
// #do= actions dispatch click events on its elements, as a person's clicks), and the test
// reads the DOM it dumps. The oracles are the other commands: tandem dump's text and
// summary, and the trace file train --trace wrote.

#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/cli_helpers.h"
#include "tests/tools/explore_layout.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

// The DOM of `page` after its scripts ran, and the actions of `hash` (the part after '#').
std::string domAfterScripts(const std::string& page, const std::string& hash = "") {
  TempDir profile;
  // As root Chromium needs --no-sandbox; without the background services it would try to
  // reach the network, which this machine does not have. Every host name fails to resolve:
  // the page must need none.
  const CommandResult r = runProgram(
      "/usr/bin/timeout",
      {"300", "/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
       "--no-first-run", "--disable-background-networking", "--disable-component-update",
       "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1400,900",
       "--user-data-dir=" + profile.file("profile"), "--dump-dom",
       "file://" + page + (hash.empty() ? "" : "#" + hash)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// An attribute of the <body> element ("" when absent).
std::string bodyData(const std::string& dom, const std::string& name) {
  const size_t body = dom.find("<body");
  const size_t end = dom.find('>', body);
  const std::string tag = dom.substr(body, end - body);
  const std::string key = " data-" + name + "=\"";
  const size_t at = tag.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return tag.substr(from, tag.find('"', from) - from);
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The graph's drawing, the details panel: the parts of the DOM the checks read.
std::string between(const std::string& dom, const std::string& open, const std::string& close) {
  const size_t at = dom.find(open);
  if (at == std::string::npos) return "";
  return dom.substr(at, dom.find(close, at) - at);
}
std::string graphOf(const std::string& dom) { return between(dom, "<g id=\"viewport\"", "</svg>"); }
std::string detailsOf(const std::string& dom) {
  return between(dom, "<aside id=\"details\"", "</aside>");
}

// The text of the details row `field`.
std::string detailsField(const std::string& dom, const std::string& field) {
  std::smatch m;
  const std::string details = detailsOf(dom);
  const std::regex row("<tr data-field=\"" + field + "\"><td>[^<]*</td><td>([^<]*)</td></tr>");
  return std::regex_search(details, m, row) ? m[1].str() : "";
}

class ExploreBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_NEED_INSTALLED(whyNoExploreLayout());
    TANDEM_NEED_INSTALLED(whyNoChromium());
  }
  std::string page(const std::vector<std::string>& args, const std::string& name) {
    std::vector<std::string> all = {"explore"};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"-o", dir_.file(name)});
    const CommandResult r = runTandem(all);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return dir_.file(name);
  }
  void expectRan(const std::string& dom) {
    EXPECT_EQ(bodyData(dom, "ready"), "1") << dom.substr(0, 2000);
    EXPECT_NE(bodyData(dom, "actions").rfind("failed", 0), 0u) << bodyData(dom, "actions");
  }
  TempDir dir_;
};

TEST_F(ExploreBrowser, LenetOnTwoDevicesShowsItsScopesInTwoLanes) {
  const std::string dom = domAfterScripts(page({"--model", "lenet", "--devices", "2"}, "l.html"));
  expectRan(dom);
  const std::string graph = graphOf(dom);
  // The layers are the scopes, in the tree and as collapsed boxes in both device lanes
  // (pool1 under conv1: fuse-conv-relu-pool's node is "conv1 + pool1 + relu").
  for (const char* scope : {"conv1", "conv2", "pool2", "fc1", "fc2", "loss"}) {
    EXPECT_TRUE(absl::StrContains(dom, absl::StrCat("data-tree-scope=\"", scope, "\""))) << scope;
    EXPECT_GE(count(graph, absl::StrCat("data-scope=\"", scope, "\"")), 2u) << scope;
  }
  EXPECT_TRUE(absl::StrContains(graph, "data-lane=\"0\""));
  EXPECT_TRUE(absl::StrContains(graph, "data-lane=\"1\""));
  EXPECT_FALSE(absl::StrContains(graph, "data-lane=\"2\""));
  // Forward, backward and update are told apart, and the collectives span the lanes.
  for (const char* phase : {"phase-0", "phase-1", "phase-2"})
    EXPECT_TRUE(absl::StrContains(graph, phase)) << phase;
  EXPECT_TRUE(absl::StrContains(graph, "class=\"item port"));
  EXPECT_TRUE(absl::StrContains(graph, "class=\"bus\""));
}

// A convolution's details name the algorithm its plan gives it (tandem dump's algo=), and
// LeNet's flatten shows the bytes it shares with pool2's output (plan-memory's views).
TEST_F(ExploreBrowser, DetailsShowTheAlgorithmAndTheBytesAViewShares) {
  const std::string path = page({"--model", "lenet", "--devices", "2"}, "a.html");
  const CommandResult text = runTandem({"dump", "--model", "lenet", "--devices", "2"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::smatch m;
  const std::regex first_conv("= conv2d\\(.*algo=([a-z]+)");
  ASSERT_TRUE(std::regex_search(text.out, m, first_conv)) << text.out.substr(0, 3000);
  const std::string conv = domAfterScripts(path, "do=select-op:conv2d");
  expectRan(conv);
  EXPECT_EQ(detailsField(conv, "op"), "conv2d");
  EXPECT_EQ(detailsField(conv, "algorithm"), m[1].str()) << detailsOf(conv);

  const std::string flatten = domAfterScripts(path, "do=select-op:flatten");
  expectRan(flatten);
  EXPECT_EQ(detailsField(flatten, "op"), "flatten");
  EXPECT_EQ(detailsField(flatten, "algorithm"), "");
  EXPECT_TRUE(absl::StrContains(detailsOf(flatten), "(a view: no copy)")) << detailsOf(flatten);
}

TEST_F(ExploreBrowser, ExpandingStage2ShowsItsBlocks) {
  const std::string path = page({"--model", "resnet18", "--devices", "4"}, "r.html");
  // The blocks of stage2, as the model's scopes in tandem dump's text name them.
  const CommandResult text = runTandem({"dump", "--model", "resnet18", "--devices", "4"});
  std::set<std::string> blocks;
  const std::regex scope("loc\\(\"(stage2\\.block[0-9]+)\\.");
  for (std::sregex_iterator it(text.out.begin(), text.out.end(), scope), end; it != end; ++it)
    blocks.insert((*it)[1]);
  ASSERT_GE(blocks.size(), 2u);

  const std::string collapsed = domAfterScripts(path);
  expectRan(collapsed);
  EXPECT_GE(count(graphOf(collapsed), "data-scope=\"stage2\""), 4u);  // a box per lane
  for (const std::string& b : blocks)
    EXPECT_FALSE(absl::StrContains(graphOf(collapsed), "data-scope=\"" + b + "\"")) << b;

  const std::string expanded = domAfterScripts(path, "do=expand:stage2");
  expectRan(expanded);
  const std::string graph = graphOf(expanded);
  for (const std::string& b : blocks)
    EXPECT_GE(count(graph, "class=\"item group phase-0\" data-scope=\"" + b + "\""), 4u) << b;
  // stage2 is now a frame around them (one per lane and phase), no longer a box.
  EXPECT_GE(count(graph, "class=\"cluster\" data-scope=\"stage2\""), 4u);
  EXPECT_FALSE(absl::StrContains(graph, "class=\"item group phase-0\" data-scope=\"stage2\""));
  EXPECT_TRUE(
      absl::StrContains(expanded, "class=\"tree-row expanded\" data-tree-scope=\"stage2\""));
}

// MiB from "25.27 MiB" or "504.2 KiB".
double mebibytes(const std::string& text) {
  double v = 0;
  const size_t space = text.find(' ');
  if (!absl::SimpleAtod(text.substr(0, space), &v)) return -1;
  return absl::StartsWith(text.substr(space + 1), "KiB") ? v / 1024 : v;
}

TEST_F(ExploreBrowser, SelectingAnAllReduceShowsItsBucket) {
  const std::string path = page({"--model", "resnet18", "--devices", "4"}, "r.html");
  const std::string dom = domAfterScripts(path, "do=select-op:all_reduce");
  expectRan(dom);
  ASSERT_TRUE(absl::StrContains(detailsOf(dom), "all_reduce"));
  EXPECT_EQ(detailsField(dom, "op"), "all_reduce");
  EXPECT_EQ(detailsField(dom, "stream"), "comm");
  EXPECT_EQ(detailsField(dom, "device"), "cpu:0, cpu:1, cpu:2, cpu:3");
  int64_t bucket = -1;
  ASSERT_TRUE(absl::SimpleAtoi(detailsField(dom, "bucket"), &bucket)) << detailsOf(dom);
  // tandem dump --format summary: "all_reduce bucket B: T tensors, M MiB per device".
  const CommandResult summary =
      runTandem({"dump", "--model", "resnet18", "--devices", "4", "--format", "summary"});
  std::smatch m;
  const std::regex line(
      absl::StrCat("all_reduce bucket ", bucket, ": ([0-9]+) tensors?, ([0-9.]+) MiB per device"));
  ASSERT_TRUE(std::regex_search(summary.out, m, line)) << summary.out;
  const size_t tensors = std::stoul(m[1]);
  const std::string bytes = detailsField(dom, "bytes");
  EXPECT_NEAR(mebibytes(bytes), std::stod(m[2]), 0.01) << bytes;
  EXPECT_TRUE(absl::StrContains(bytes, absl::StrCat("(", tensors, " tensor"))) << bytes;
  // Its parameters: one per tensor, each a trained variable of the module.
  const std::string params = between(detailsOf(dom), "<ul class=\"bucket-params\">", "</ul>");
  EXPECT_EQ(count(params, "<li"), tensors) << params;
  const CommandResult text = runTandem({"dump", "--model", "resnet18", "--devices", "4"});
  const std::regex item("<li class=\"mono\">@([^<]+)</li>");
  for (std::sregex_iterator it(params.begin(), params.end(), item), end; it != end; ++it)
    EXPECT_TRUE(absl::StrContains(text.out, absl::StrCat("var @", (*it)[1].str(), " : ")))
        << (*it)[1];
}

// With a training run's trace: selecting a node highlights its spans on the timeline, and
// clicking a span selects its node.
TEST_F(ExploreBrowser, TimelineAndGraphAreLinkedBothWays) {
  TempDir data;
  writeIdxSplit(data, "train", 160);
  writeIdxSplit(data, "t10k", 32);
  const std::string trace = dir_.file("trace.json");
  const CommandResult train =
      runTandem({"train", "--model", "lenet", "--devices", "2", "--batch", "32", "--epochs", "1",
                 "--data", data.file(""), "--trace", trace});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const std::string path =
      page({"--model", "lenet", "--devices", "2", "--batch", "32", "--trace", trace}, "t.html");

  // The trace file's slices: which node each is of (by its first result's name), in order.
  const json written = json::parse(readFile(trace));
  std::vector<std::string> slice_nodes;
  for (const json& e : written["traceEvents"])
    if (e["ph"] == "X") {
      const std::string node = e["args"]["node"];
      slice_nodes.push_back(node.substr(1, node.find(' ') - 1));  // "%conv1.0 (..." -> conv1.0
    }
  ASSERT_FALSE(slice_nodes.empty());

  const std::string selected = domAfterScripts(path, "do=select-op:conv2d;view:timeline");
  expectRan(selected);
  const std::string node = bodyData(selected, "selected");
  ASSERT_FALSE(node.empty());
  const size_t spans = std::count(slice_nodes.begin(), slice_nodes.end(), node);
  EXPECT_EQ(spans, 3u);  // one per traced step
  EXPECT_EQ(bodyData(selected, "highlighted-spans"), std::to_string(spans));
  EXPECT_EQ(count(between(selected, "<ul id=\"timeline-selection\"", "</ul>"),
                  "<li class=\"highlighted\""),
            spans);

  // A click on a comm span (an all_reduce's) selects that node.
  size_t k = 0;
  for (const json& e : written["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["tid"] == 1 && e["args"]["op"] == "all_reduce") break;
    ++k;
  }
  ASSERT_LT(k, slice_nodes.size());
  const std::string clicked =
      domAfterScripts(path, absl::StrCat("do=view:timeline;zoom-span:", k, ";click-span:", k));
  expectRan(clicked);
  EXPECT_EQ(bodyData(clicked, "selected"), slice_nodes[k]);
  EXPECT_EQ(detailsField(clicked, "op"), "all_reduce");
}

}  // namespace
}  // namespace tandem::testing
