// The DOT exporter: one cluster per device, collectives and host values outside the
// clusters, and output that Graphviz accepts.

#include "ir/dot.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "ir/printer.h"
#include "tests/ir/zoo_stages.h"
#include "tests/test_util.h"

namespace tandem::ir {
namespace {

/// Where each node line of a DOT text sits: the cluster label, or "" outside clusters.
struct DotLayout {
  std::vector<std::string> cluster_labels;  // in order of appearance
  std::vector<std::string> cluster_of;      // indexed by node id ("" = outside)
  int node_lines = 0;
};

DotLayout layoutOf(const std::string& dot, size_t num_nodes) {
  DotLayout out;
  out.cluster_of.assign(num_nodes, "<missing>");
  std::string current;
  bool in_cluster = false;
  for (absl::string_view line : absl::StrSplit(dot, '\n')) {
    if (absl::StartsWith(line, "  subgraph cluster_")) {
      in_cluster = true;
      current.clear();
      continue;
    }
    if (in_cluster && absl::StartsWith(line, "    label=\"")) {
      current = std::string(line.substr(11, line.size() - 13));  // drop `    label="` and `";`
      out.cluster_labels.push_back(current);
      continue;
    }
    if (in_cluster && line == "  }") {
      in_cluster = false;
      continue;
    }
    // Node lines: `n12 [label=...`; edges `n1 -> n2;` have no '['.
    absl::string_view body = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::StartsWith(body, "n") || !absl::StrContains(body, " [label=")) continue;
    size_t id = std::stoul(std::string(body.substr(1, body.find(' ') - 1)));
    if (id < num_nodes) out.cluster_of[id] = in_cluster ? current : "";
    ++out.node_lines;
  }
  return out;
}

std::unique_ptr<Module> lenetOn(int devices, int64_t batch) {
  return testing::buildAtStage({"lenet", batch, devices, 0.9}, testing::stageNames().size() - 1);
}

TEST(Dot, OneClusterPerDeviceWithCollectivesOutside) {
  auto m = lenetOn(2, 64);
  ASSERT_NE(m, nullptr);
  for (const auto& g : m->graphs()) {
    SCOPED_TRACE(g->name());
    std::string dot = exportDot(*g);
    EXPECT_TRUE(absl::StartsWith(dot, absl::StrCat("digraph \"", g->name(), "\" {\n")));
    EXPECT_TRUE(absl::EndsWith(dot, "}\n"));
    DotLayout layout = layoutOf(dot, g->numNodes());
    EXPECT_EQ(layout.cluster_labels, (std::vector<std::string>{"cpu:0", "cpu:1"}));
    EXPECT_EQ(layout.node_lines, static_cast<int>(g->numNodes()));
    int collectives = 0;
    for (size_t i = 0; i < g->numNodes(); ++i) {
      const Node& n = *g->nodes()[i];
      std::string want = n.info().has(kCollective) || !n.device() ? "" : toString(*n.device());
      EXPECT_EQ(layout.cluster_of[i], want) << printNode(n);
      if (n.info().has(kCollective)) ++collectives;
    }
    EXPECT_GT(collectives, 0);  // broadcasts in init, split and all_reduce in the steps
  }
}

TEST(Dot, CollectivesStandOut) {
  auto m = lenetOn(2, 64);
  ASSERT_NE(m, nullptr);
  const Graph& g = *m->graph(kTrainGraph);
  std::string dot = exportDot(g);
  for (size_t i = 0; i < g.numNodes(); ++i) {
    const Node& n = *g.nodes()[i];
    if (!n.info().has(kCollective)) continue;
    std::string prefix = absl::StrCat("  n", i, " [label=\"", n.opName());
    size_t at = dot.find(prefix);
    ASSERT_NE(at, std::string::npos) << prefix;
    std::string line = dot.substr(at, dot.find('\n', at) - at);
    EXPECT_TRUE(absl::StrContains(line, "fillcolor=orange")) << line;
    EXPECT_TRUE(absl::StrContains(line, "bold")) << line;
  }
  // Gradients are summed in buckets; the label says which.
  EXPECT_TRUE(absl::StrContains(dot, "[label=\"all_reduce bucket 0\\n%"));
}

TEST(Dot, ClustersFollowTheModuleDeviceOrder) {
  // Twelve devices: a lexicographic order would put cpu:10 before cpu:2.
  auto m = lenetOn(12, 48);
  ASSERT_NE(m, nullptr);
  const Graph& g = *m->graph(kTrainGraph);
  DotLayout layout = layoutOf(exportDot(g), g.numNodes());
  std::vector<std::string> want;
  for (const Device& d : m->devices()) want.push_back(toString(d));
  EXPECT_EQ(layout.cluster_labels, want);
}

TEST(Dot, UnreplicatedGraphHasNoClusters) {
  auto m = testing::buildAtStage({"lenet", 8, 2, 0}, 1);  // after autodiff
  ASSERT_NE(m, nullptr);
  std::string dot = exportDot(*m->graph(kTrainGraph));
  EXPECT_FALSE(absl::StrContains(dot, "subgraph"));
  EXPECT_TRUE(absl::StrContains(dot, "  out [label=\"return\", shape=doublecircle];\n"));
}

TEST(Dot, GraphvizAcceptsTheOutput) {
  const std::string dot_path = "/usr/bin/dot";
  TANDEM_NEED_INSTALLED(testing::whyNoGraphviz());
  auto m = lenetOn(2, 64);
  ASSERT_NE(m, nullptr);
  for (const auto& g : m->graphs()) {
    SCOPED_TRACE(g->name());
    testing::CommandResult r = testing::runProgram(dot_path, {"-Tsvg"}, exportDot(*g));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "<svg")) << r.out.substr(0, 200);
    EXPECT_EQ(r.err, "");
  }
}

}  // namespace
}  // namespace tandem::ir
