// The collapsed DOT views: one box per scope, phase and device, collectives kept apart,
// parallel edges merged and labeled with the tensors they carry, one scope expanded by
// --focus; golden text for LeNet on two devices and renders by Graphviz.

#include "ir/dot_views.h"

#include <unistd.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "ir/dot.h"
#include "tests/ir/zoo_stages.h"
#include "tests/test_util.h"

namespace tandem::ir {
namespace {

const std::string kGoldenDir = "tests/golden/dot/";

std::unique_ptr<Module> modelOn(const std::string& model, int devices, int64_t batch) {
  return testing::buildAtStage({model, batch, devices, 0.9}, testing::stageNames().size() - 1);
}

std::string view(const Graph& g, DotView v) {
  auto dot = exportDotView(g, v);
  EXPECT_TRUE(dot.ok()) << dot.status();
  return dot.ok() ? *dot : "";
}

/// The labels of boxes ("b3 [label=...") in a DOT text, first line only ("conv1").
std::vector<std::string> boxScopes(const std::string& dot) {
  std::vector<std::string> out;
  static const std::regex box(R"(^ +b\d+ \[label="([^"\\]*)\\n)");
  for (absl::string_view line : absl::StrSplit(dot, '\n')) {
    std::smatch m;
    std::string s(line);
    if (std::regex_search(s, m, box)) out.push_back(m[1]);
  }
  return out;
}

TEST(DotView, LenetCollapsedMatchesGolden) {
  auto m = modelOn("lenet", 2, 64);
  ASSERT_NE(m, nullptr);
  for (const auto& g : m->graphs()) {
    SCOPED_TRACE(g->name());
    EXPECT_EQ(testing::compareWithGolden(view(*g, {}),
                                         absl::StrCat(kGoldenDir, "lenet.x2.", g->name(), ".dot")),
              "");
  }
  const Graph& train = *m->graph(kTrainGraph);
  EXPECT_EQ(testing::compareWithGolden(view(train, {.collapse = 1, .focus = "conv2"}),
                                       kGoldenDir + "lenet.x2.train_step.focus_conv2.dot"),
            "");
}

TEST(DotView, EveryNodeIsInExactlyOnePlace) {
  auto m = modelOn("resnet18", 2, 8);
  ASSERT_NE(m, nullptr);
  const Graph& g = *m->graph(kTrainGraph);
  for (int depth : {1, 2, 3}) {
    SCOPED_TRACE(depth);
    std::string dot = view(g, {.collapse = depth});
    // Box labels end in ", N nodes"; collectives and host nodes are drawn one by one.
    int64_t in_boxes = 0, alone = 0;
    static const std::regex node(R"(^ +n\d+ \[label=")");
    static const std::regex count(R"(, (\d+) nodes?", shape=box, style="rounded)");
    for (absl::string_view line : absl::StrSplit(dot, '\n')) {
      std::string s(line);
      std::smatch match;
      if (std::regex_search(s, match, count)) in_boxes += std::stoll(match[1]);
      if (std::regex_search(s, node)) ++alone;
    }
    EXPECT_EQ(in_boxes + alone, static_cast<int64_t>(g.numNodes()));
    int collectives = 0;
    for (const auto& n : g.nodes()) collectives += n->info().has(kCollective);
    EXPECT_GE(alone, collectives);
    // No edge twice, none from a box to itself.
    std::set<std::string> edges;
    static const std::regex edge(R"(^  (\w+) -> (\w+) \[xlabel=)");
    for (absl::string_view line : absl::StrSplit(dot, '\n')) {
      std::string s(line);
      std::smatch match;
      if (!std::regex_search(s, match, edge)) continue;
      EXPECT_NE(match[1], match[2]) << s;
      EXPECT_TRUE(edges.insert(absl::StrCat(match[1].str(), ">", match[2].str())).second) << s;
    }
    EXPECT_GT(edges.size(), g.numNodes() / 20);  // the pattern still matches the edges
    // Edges with many kinds of tensor (a stage's gradients into a bucket) give a total.
    EXPECT_TRUE(std::regex_search(dot, std::regex(R"(xlabel="\d+ tensors\\n[0-9.]+ [KM]iB")")));
  }
}

TEST(DotView, DepthPicksTheScopePrefix) {
  auto m = modelOn("resnet18", 2, 8);
  ASSERT_NE(m, nullptr);
  const Graph& g = *m->graph(kTrainGraph);
  std::set<std::string> top, blocks;
  for (const std::string& s : boxScopes(view(g, {.collapse = 1}))) top.insert(s);
  for (const std::string& s : boxScopes(view(g, {.collapse = 2}))) blocks.insert(s);
  EXPECT_TRUE(top.count("stage2") && top.count("stem") && top.count("head"));
  EXPECT_FALSE(top.count("stage2.block0"));
  EXPECT_TRUE(blocks.count("stage2.block0") && blocks.count("stage2.block1"));
  EXPECT_FALSE(blocks.count("stage2"));
  // Each scope at most three times per device (forward, backward, update), two devices.
  std::vector<std::string> all = boxScopes(view(g, {.collapse = 1}));
  for (const std::string& s : top) EXPECT_LE(std::count(all.begin(), all.end(), s), 6) << s;
}

TEST(DotView, CollectivesShowBucketBytesAndDevices) {
  auto m = modelOn("lenet", 2, 64);
  ASSERT_NE(m, nullptr);
  const Graph& g = *m->graph(kTrainGraph);
  std::string dot = view(g, {});
  for (size_t i = 0; i < g.numNodes(); ++i) {
    const Node* n = g.nodes()[i].get();
    if (n->op() != Op::kAllReduce) continue;
    std::string prefix =
        absl::StrCat("  n", i, " [label=\"all_reduce bucket ", n->intAttr("bucket"), "\\n");
    size_t at = dot.find(prefix);
    ASSERT_NE(at, std::string::npos) << prefix;
    std::string line = dot.substr(at, dot.find('\n', at) - at);
    int64_t bytes = 0;
    // Results are grouped by device: the first half is cpu:0's.
    for (size_t r = 0; r < n->numResults() / 2; ++r) bytes += n->result(r)->type().bytes();
    std::string size = bytes < 1024      ? absl::StrCat(bytes, " B")
                       : bytes < 1048576 ? absl::StrFormat("%.1f KiB", bytes / 1024.0)
                                         : absl::StrFormat("%.2f MiB", bytes / 1048576.0);
    EXPECT_TRUE(absl::StrContains(
        line, absl::StrCat(n->numResults() / 2, n->numResults() == 2 ? " tensor, " : " tensors, ",
                           size, " per device")))
        << line;
    EXPECT_TRUE(absl::StrContains(line, "cpu:0, cpu:1")) << line;
    EXPECT_TRUE(absl::StrContains(line, "fillcolor=orange")) << line;
  }
}

TEST(DotView, FocusExpandsOneScope) {
  auto m = modelOn("resnet18", 2, 8);
  ASSERT_NE(m, nullptr);
  const Graph& g = *m->graph(kTrainGraph);
  std::string dot = view(g, {.collapse = 1, .focus = "stage2.block0"});
  std::vector<std::string> scopes = boxScopes(dot);
  EXPECT_NE(std::find(scopes.begin(), scopes.end(), "stage2"), scopes.end());  // the rest
  EXPECT_TRUE(absl::StrContains(dot, "_focus {\n      label=\"stage2.block0\";"));
  // Every node of the block is drawn on its own, inside a focus cluster.
  for (size_t i = 0; i < g.numNodes(); ++i) {
    const Node* n = g.nodes()[i].get();
    if (!absl::StartsWith(n->scope(), "stage2.block0.") || !n->device()) continue;
    EXPECT_TRUE(absl::StrContains(dot, absl::StrCat("      n", i, " [label=\""))) << n->describe();
  }
}

TEST(DotView, UnknownFocusListsScopes) {
  auto m = modelOn("resnet18", 2, 8);
  ASSERT_NE(m, nullptr);
  auto dot = exportDotView(*m->graph(kTrainGraph), {.collapse = 1, .focus = "stage9"});
  ASSERT_FALSE(dot.ok());
  EXPECT_TRUE(absl::StrContains(dot.status().message(), "no scope 'stage9'")) << dot.status();
  EXPECT_TRUE(absl::StrContains(dot.status().message(), "stem, stage1, stage2")) << dot.status();
  // A prefix of a component is not a scope.
  EXPECT_FALSE(exportDotView(*m->graph(kTrainGraph), {.collapse = 1, .focus = "stage2.bl"}).ok());
}

TEST(DotView, CollapseZeroIsTheFullDrawing) {
  auto m = modelOn("lenet", 2, 64);
  ASSERT_NE(m, nullptr);
  const Graph& g = *m->graph(kTrainGraph);
  EXPECT_EQ(view(g, {.collapse = 0}), exportDot(g));
  EXPECT_FALSE(exportDotView(g, {.collapse = 0, .focus = "conv1"}).ok());
}

// Every zoo model on eight devices through the CLI: tests/tools/dump_dot_test.cc.
TEST(DotView, GraphvizRendersTheViews) {
  const std::string dot_path = "/usr/bin/dot";
  TANDEM_NEED_INSTALLED(testing::whyNoGraphviz());
  auto m = modelOn("resnet18", 2, 8);
  ASSERT_NE(m, nullptr);
  for (DotView v : {DotView{.collapse = 1}, DotView{.collapse = 2},
                    DotView{.collapse = 1, .focus = "stage3.block1"}}) {
    SCOPED_TRACE(absl::StrCat(v.collapse, " ", v.focus));
    testing::CommandResult r =
        testing::runProgram(dot_path, {"-Tsvg"}, view(*m->graph(kTrainGraph), v));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "<svg")) << r.out.substr(0, 200);
    EXPECT_EQ(r.err, "");
  }
}

}  // namespace
}  // namespace tandem::ir
