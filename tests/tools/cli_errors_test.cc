// Every user error of the tandem CLI: exit code 2, nothing on standard output, and one
// line on standard error that names the culprit.

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

std::vector<std::string> lenetDump(std::vector<std::string> extra) {
  std::vector<std::string> args{"dump", "--model", "lenet"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(CliErrorsTest, SubcommandErrors) {
  EXPECT_TRUE(isUsageError(runTandem({}), {"missing subcommand (dump, explore, opt, train, plot, "
                                           "simulate, import, run, export, generate, predict or devices)"}));
  EXPECT_TRUE(isUsageError(runTandem({"frobnicate", "--model", "lenet"}),
                           {"unknown subcommand 'frobnicate' (expected dump, explore, opt, train, "
                            "plot, simulate, import, run, export, generate, predict or devices)"}));
}

TEST(CliErrorsTest, UnknownFlagIsNamed) {
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--colour"})), {"--colour"}));
  EXPECT_TRUE(isUsageError(runTandem({"opt", "x.tir", "--passs", "dce"}), {"--passs"}));
  EXPECT_TRUE(isUsageError(runTandem({"--verbose"}), {"--verbose"}));
  // A misspelt required flag is reported as itself, not as "--model is required".
  EXPECT_TRUE(isUsageError(runTandem({"dump", "--modle", "lenet"}), {"--modle"}));
}

TEST(CliErrorsTest, ModelErrors) {
  EXPECT_TRUE(isUsageError(runTandem({"dump", "--batch", "8"}),
                           {"--model: is required (one of lenet", "resnet152"}));
  EXPECT_TRUE(isUsageError(runTandem({"dump", "--model", "resnet19"}),
                           {"--model: unknown model 'resnet19'", "resnet18"}));
  EXPECT_TRUE(isUsageError(runTandem({"dump", "--model"}), {"--model"}));
}

TEST(CliErrorsTest, DeviceErrors) {
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--devices", "gpu:0"})),
                           {"--devices: unknown device 'gpu:0'", "cpu or cuda"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--devices", "cpu:0,cpu:0"})),
                           {"--devices: device cpu:0 is listed twice"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--devices", "cpu:0,,cpu:1"})),
                           {"--devices: unknown device ''"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--devices", "0"})), {"--devices", "count 0"}));
}

TEST(CliErrorsTest, BatchErrors) {
  EXPECT_TRUE(
      isUsageError(runTandem(lenetDump({"--batch", "0"})), {"--batch: 0 is out of range: must be from 1 to 2147483648"}));
  EXPECT_TRUE(
      isUsageError(runTandem(lenetDump({"--batch", "-4"})), {"--batch: -4 is out of range: must be from 1 to 2147483648"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--batch", "2", "--devices", "3"})),
                           {"--batch: 2 is smaller than the device count 3"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--batch", "12x"})), {"--batch", "'12x'"}));
  // Out of range: CLI11 alone would clamp this to INT64_MAX and go on.
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--batch", "99999999999999999999"})),
                           {"--batch: 99999999999999999999 is out of range"}));
}

TEST(CliErrorsTest, OutputSelectionErrors) {
  EXPECT_TRUE(isUsageError(
      runTandem(lenetDump({"--after", "frobnicate"})),
      {"--after: 'frobnicate' is not a pass of the default pipeline", "insert-collectives"}));
  EXPECT_TRUE(
      isUsageError(runTandem(lenetDump({"--format", "xml"})), {"--format: unknown format 'xml'"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--graph", "backward"})),
                           {"--graph: module lenet has no graph 'backward'", "eval_step"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--split", "3,x", "--devices", "2"})),
                           {"--split: '3,x'"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--split", "3,1,1", "--devices", "2"})),
                           {"--split: 3 weights for 2 devices"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"-o", "/nonexistent-dir/x.tir"})),
                           {"--output: cannot write '/nonexistent-dir/x.tir'"}));
  EXPECT_TRUE(isUsageError(runTandem(lenetDump({"--bucket-mb", "0"})), {"bucket-mb"}));
}

class OptErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CommandResult r =
        runTandem({"dump", "--model", "lenet", "--batch", "16", "--devices", "2", "--canonical"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    good_ = r.out;
    good_file_ = dir_.write("good.tir", good_);
  }

  TempDir dir_;
  std::string good_, good_file_;
};

TEST_F(OptErrorsTest, PipelineErrors) {
  EXPECT_TRUE(isUsageError(runTandem({"opt", good_file_, "--passes", "dce,frobnicate"}),
                           {"--passes: unknown pass 'frobnicate'", "known: mixed-precision, autodiff"}));
  EXPECT_TRUE(isUsageError(runTandem({"opt", good_file_, "--passes", "replicate{devices=two}"}),
                           {"--passes: pass replicate: option 'devices'", "'two'"}));
  EXPECT_TRUE(isUsageError(runTandem({"opt", good_file_, "--passes", "replicate{devicez=2}"}),
                           {"pass replicate has no option 'devicez'"}));
  EXPECT_TRUE(isUsageError(runTandem({"opt", good_file_, "--passes", "replicate{devices=2"}),
                           {"--passes: unclosed bracket"}));
}

TEST_F(OptErrorsTest, FileErrors) {
  EXPECT_TRUE(isUsageError(runTandem({"opt"}), {"missing the IR file"}));
  std::string missing = dir_.file("missing.tir");
  EXPECT_TRUE(isUsageError(runTandem({"opt", missing}), {"'" + missing + "'"}));
  std::string empty = dir_.write("empty.tir", "");
  EXPECT_TRUE(isUsageError(runTandem({"opt", empty}),
                           {empty + ":1:1: expected 'module', got end of input"}));
  EXPECT_TRUE(isUsageError(runTandem({"opt", "-"}, ""), {"<stdin>:1:1:"}));
}

TEST_F(OptErrorsTest, SyntaxErrorGivesFileLineAndColumn) {
  // Line 2 of the file: "var @conv1.w : f32(20..." instead of "f32[20...".
  std::string text = good_;
  size_t at = text.find("var @conv1.w : f32[");
  ASSERT_EQ(at, text.find('\n') + 1) << "the first variable is expected on line 2";
  text[at + std::string("var @conv1.w : f32").size()] = '(';
  std::string file = dir_.write("syntax.tir", text);
  EXPECT_TRUE(isUsageError(runTandem({"opt", file}), {file + ":2:19: "}));

  // An unknown op in the middle of a graph.
  size_t line_start = good_.find("  %relu_2.0 = relu(");
  ASSERT_NE(line_start, std::string::npos);
  int line = 1 + static_cast<int>(std::count(good_.begin(), good_.begin() + line_start, '\n'));
  std::string bad_op = good_;
  bad_op.replace(line_start, std::string("  %relu_2.0 = relu(").size(), "  %relu_2.0 = rectify(");
  std::string op_file = dir_.write("op.tir", bad_op);
  EXPECT_TRUE(isUsageError(runTandem({"opt", op_file}),
                           {absl::StrCat(op_file, ":", line, ":15: unknown op 'rectify'")}));
}

TEST_F(OptErrorsTest, FileThatParsesButFailsVerification) {
  // fc1's relu moved to cpu:0 while its operand stays on cpu:1: only collectives may cross.
  std::string text = absl::StrReplaceAll(
      good_, {{"%relu_2.1 = relu(%fc1.1) @cpu:1", "%relu_2.1 = relu(%fc1.1) @cpu:0"}});
  ASSERT_NE(text, good_);
  std::string file = dir_.write("unverified.tir", text);
  EXPECT_TRUE(isUsageError(
      runTandem({"opt", file}),
      {file + ": verifier: graph @train_step: %relu_2.1 (relu @cpu:0): operand 0 %fc1.1 is on "
              "cpu:1, expected cpu:0"}));
  // --no-verify takes the file as it is.
  CommandResult r = runTandem({"opt", file, "--no-verify", "--canonical"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == text);
}

TEST_F(OptErrorsTest, BinaryGarbage) {
  std::string png("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\xfe", 18);
  std::string file = dir_.write("image.tir", png);
  EXPECT_TRUE(isUsageError(runTandem({"opt", file}), {file + ":1:1: unexpected byte 0x89"}));
  EXPECT_TRUE(isUsageError(runTandem({"opt", "-"}, png), {"<stdin>:1:1: unexpected byte 0x89"}));

  // Random bytes, and a valid file with random bytes spliced in: always one clean line.
  std::mt19937 rng(20261121);
  for (int i = 0; i < 12; ++i) {
    std::string bytes(64 + rng() % 512, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    if (i % 2 == 1) bytes = good_.substr(0, rng() % good_.size()) + bytes;
    std::string path = dir_.write(absl::StrCat("garbage", i, ".tir"), bytes);
    EXPECT_TRUE(isUsageError(runTandem({"opt", path}), {path + ":"})) << "garbage " << i;
  }
}

}  // namespace
}  // namespace tandem::testing
