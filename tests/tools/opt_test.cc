// `tandem opt`: passes run over text IR give what the same passes give in `tandem dump`.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class OptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CommandResult r = runTandem(
        {"dump", "--model", "lenet", "--batch", "64", "--after", "autodiff", "--canonical"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    autodiff_ = r.out;
    autodiff_file_ = dir_.write("lenet_autodiff.tir", autodiff_);
  }

  TempDir dir_;
  std::string autodiff_, autodiff_file_;
};

TEST_F(OptTest, ReplicateAndInsertCollectivesMatchTheDumpPipeline) {
  CommandResult opt =
      runTandem({"opt", autodiff_file_, "--passes",
                 "fuse-relu-pool,fuse-conv-relu-pool,replicate{devices=2},insert-collectives",
                 "--canonical"});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  EXPECT_EQ(opt.err, "");
  EXPECT_THAT(opt.out, AllOf(StartsWith("module @lenet devices=[cpu:0, cpu:1] {"),
                             HasSubstr(" = split(%x) {axis=0, sizes=[32,32]"),
                             HasSubstr(" = all_reduce(%fc2.w.grad.0,"),
                             HasSubstr(" = broadcast(%conv1.w.0)")));
  CommandResult dump = runTandem({"dump", "--model", "lenet", "--batch", "64", "--devices",
                                  "cpu:0,cpu:1", "--after", "insert-collectives", "--canonical"});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_TRUE(opt.out == dump.out) << "opt and dump disagree";
}

TEST_F(OptTest, EmptyPipelinePrintsTheInputUnchanged) {
  CommandResult r = runTandem({"opt", autodiff_file_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == autodiff_);
}

TEST_F(OptTest, PrintAfterWritesTheIntermediateModuleToStandardError) {
  CommandResult r =
      runTandem({"opt", autodiff_file_, "--passes", "replicate{devices=2},insert-collectives",
                 "--print-after", "replicate", "--canonical", "--format", "summary"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, StartsWith("// ----- after replicate -----\nmodule @lenet devices=[cpu:0, "
                                "cpu:1] {\n"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("all_reduce(")));  // printed before collectives
  EXPECT_THAT(r.out, AllOf(StartsWith("model lenet: 129,068 parameters"),
                           HasSubstr("all_reduce bucket 0: 8 tensors")));
}

TEST_F(OptTest, GraphAndDotOnOneGraph) {
  CommandResult text = runTandem({"opt", autodiff_file_, "--graph", "init"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, StartsWith("graph @init() {\n"));
  CommandResult dot = runTandem({"opt", autodiff_file_, "--format", "dot", "--graph", "eval_step"});
  ASSERT_EQ(dot.exit_code, 0) << dot.err;
  EXPECT_THAT(dot.out, StartsWith("digraph \"eval_step\" {"));
}

TEST_F(OptTest, DceOnAFullyOptimizedModuleChangesNothing) {
  CommandResult full =
      runTandem({"dump", "--model", "lenet", "--batch", "64", "--devices", "2", "--canonical"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  CommandResult r = runTandem({"opt", "-", "--passes", "dce", "--canonical"}, full.out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == full.out);
}

}  // namespace
}  // namespace tandem::testing
