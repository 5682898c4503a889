// `tandem dump --format dot` as a user runs it: the README's command renders, the default
// (collapsed) view renders for every zoo model on eight devices, and --collapse and
// --focus change the drawing. The render times are in docs/PERF.md, not asserted here.

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/zoo/zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kGraphviz = "/usr/bin/dot";

std::string dumpDot(std::vector<std::string> args) {
  args.insert(args.begin(), {"dump", "--format", "dot"});
  CommandResult r = runTandem(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r.out;
}

/// Renders DOT text to SVG with Graphviz; records a failure unless it renders cleanly.
void expectRenders(const std::string& dot) {
  CommandResult svg = runProgram(kGraphviz, {"-Tsvg"}, dot);
  EXPECT_EQ(svg.exit_code, 0) << svg.err;
  EXPECT_EQ(svg.err, "");
  EXPECT_THAT(svg.out, AllOf(HasSubstr("<svg"), HasSubstr("</svg>")));
}

TEST(DumpDot, ReadmeCommandRenders) {
  TANDEM_NEED_INSTALLED(testing::whyNoGraphviz());
  // The README's command: four devices, the default view.
  std::string dot = dumpDot({"--model", "resnet18", "--devices", "cpu:0,cpu:1,cpu:2,cpu:3"});
  EXPECT_THAT(dot, AllOf(StartsWith("digraph \"train_step\" {"), HasSubstr("label=\"cpu:3\""),
                         HasSubstr("all_reduce bucket 0\\n"), HasSubstr("stage4\\nbackward")));
  expectRenders(dot);
}

TEST(DumpDot, DefaultViewRendersForEveryZooModelOnEightDevices) {
  TANDEM_NEED_INSTALLED(testing::whyNoGraphviz());
  for (const std::string& model : zoo::modelNames()) {
    SCOPED_TRACE(model);
    expectRenders(dumpDot({"--model", model, "--devices", "8"}));
  }
}

TEST(DumpDot, CollapseAndFocusChangeTheDrawing) {
  const std::vector<std::string> model = {"--model", "resnet18", "--devices", "2", "--batch", "8"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), model.begin(), model.end());
    return dumpDot(extra);
  };
  std::string stages = with({});
  std::string blocks = with({"--collapse", "2"});
  std::string nodes = with({"--collapse", "0"});
  EXPECT_EQ(stages, with({"--collapse", "1"}));
  EXPECT_THAT(stages, AllOf(HasSubstr("[label=\"stage2\\nforward, "),
                            Not(HasSubstr("[label=\"stage2.block0\\n"))));
  EXPECT_THAT(blocks, HasSubstr("[label=\"stage2.block0\\nforward, "));
  // Every node: no boxes, one line per node.
  EXPECT_THAT(nodes, Not(HasSubstr("nodes\", shape=box")));
  EXPECT_LT(stages.size(), blocks.size());
  EXPECT_LT(blocks.size(), nodes.size());
  std::string focused = with({"--focus", "stage3.block1"});
  EXPECT_THAT(focused, AllOf(HasSubstr("label=\"stage3.block1\";"),
                             HasSubstr("[label=\"stage3\\nforward, ")));
  if (access(kGraphviz.c_str(), X_OK) == 0) expectRenders(focused);
}

TEST(DumpDot, OptDrawsItsInputCollapsedToo) {
  // Text with locations keeps the scopes; opt draws the same boxes as dump.
  CommandResult text = runTandem({"dump", "--model", "lenet", "--devices", "2", "--batch", "8"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  CommandResult viaOpt = runTandem({"opt", "-", "--format", "dot"}, text.out);
  ASSERT_EQ(viaOpt.exit_code, 0) << viaOpt.err;
  EXPECT_EQ(viaOpt.out, dumpDot({"--model", "lenet", "--devices", "2", "--batch", "8"}));
}

}  // namespace
}  // namespace tandem::testing
