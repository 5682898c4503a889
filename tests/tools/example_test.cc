// examples/custom_model: the user example runs, and what it prints is a real parallel
// training step: the graph parses back (inside a module declaring its variables),
// verifies, and prints identically.

#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ExampleTest, CustomModelPrintsAParallelTrainStep) {
  CommandResult r = runProgram(TANDEM_EXAMPLE_PATH, {"--print-step"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, StartsWith("graph @train_step(%x: f32[128,1,28,28], %y: i32[128]) {\n"));
  EXPECT_THAT(r.out, AllOf(HasSubstr(" = split(%x) {axis=0, sizes=[64,64]"),
                           HasSubstr(" = all_reduce("), HasSubstr("\n  sgd_update(%head.fc.w.0, "),
                           HasSubstr("loc(\"block1.conv1\", \"custom_model.cc:")));

  // The last line is the summary; everything before it is the graph.
  ASSERT_FALSE(r.out.empty());
  size_t last = r.out.rfind('\n', r.out.size() - 2) + 1;
  std::string graph = r.out.substr(0, last), summary = r.out.substr(last);
  EXPECT_EQ(summary, "// tiny_vgg: 3 all_reduce nodes in @train_step over cpu:0,cpu:1\n");

  // Declare the variables the graph reads (role from the name) and parse it as a module.
  std::string module = "module @tiny_vgg devices=[cpu:0, cpu:1] {\n";
  std::regex param(R"(param\(\) \{var=@([^}]+)\} @cpu:0 : (\S+))");
  std::set<std::string> declared;
  for (std::sregex_iterator it(graph.begin(), graph.end(), param), end; it != end; ++it) {
    std::string name = (*it)[1];
    if (!declared.insert(name).second) continue;
    bool buffer = name.find(".running_") != std::string::npos;
    absl::StrAppend(&module, "var @", name, " : ", std::string((*it)[2]),
                    " {role=", buffer ? "buffer" : "param", ", init=zeros}\n");
  }
  EXPECT_EQ(declared.size(), 22u);  // 14 parameters + 8 running statistics
  absl::StrAppend(&module, "\n", graph, "}\n");
  auto parsed = ir::parseModule(module, "custom_model.out");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(ir::verifyModule(**parsed).ok()) << ir::verifyModule(**parsed);
  EXPECT_EQ((*parsed)->countElements(ir::VarRole::kParam), 65834);
  const ir::Graph* step = (*parsed)->graph(ir::kTrainGraph);
  ASSERT_NE(step, nullptr);
  EXPECT_TRUE(ir::printGraph(*step) == graph) << "the graph does not print back identically";
}

}  // namespace
}  // namespace tandem::testing
