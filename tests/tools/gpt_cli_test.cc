// `tandem train --model gpt` on a text (issue 43): trained by steps with its last tenth held
// out, the table of a language model (step, validation loss and bits per character,
// tokens/s), the metrics CSV's columns, and the flags that size it.

#include <string>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string corpus(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += i % 3 == 0 ? "In the beginning God created the heaven and the earth.\n"
                       : "And the earth was without form, and void.\n";
  return dir.write("corpus.txt", text);
}

TEST(GptCli, TrainsByStepsOnATextAndReportsValidationBitsPerCharacter) {
  TempDir dir;
  const CommandResult r =
      runTandem({"train",     "--model",     "gpt",       "--data",      "text:" + corpus(dir),
                 "--devices", "cpu:0,cpu:1", "--context", "16",          "--gpt-layers",
                 "1",         "--gpt-heads", "2",         "--gpt-width", "32",
                 "--batch",   "8",           "--steps",   "6",           "--eval-every",
                 "3",         "--warmup",    "2",         "--metrics",   dir.file("m.csv"),
                 "--plot",    dir.file("curves.svg")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("6 steps of 8 sequences (16 tokens each), an evaluation every "
                               "3 steps on"));
  EXPECT_THAT(r.out, HasSubstr(" step train_loss   val_loss  val_bpc  seconds  tokens/s"));
  EXPECT_THAT(r.out, Not(HasSubstr("train_acc")));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n +3 +[0-9.]+ +[0-9.]+ +[0-9.]+ "));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n +6 +[0-9.]+ +[0-9.]+ +[0-9.]+ "));
  const std::string csv = readFile(dir.file("m.csv"));
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << csv;
  EXPECT_THAT(lines[0], HasSubstr(",step,val_loss,val_bpc,tokens_per_s"));
  EXPECT_THAT(lines[2], ::testing::StartsWith("2,"));
  EXPECT_THAT(lines[2], ::testing::ContainsRegex(",6,[0-9.]+,[0-9.]+,[0-9.]+$"));
  // --plot draws the losses against the step (gnuplot: scripts/setup installs it).
  const std::string svg = readFile(dir.file("curves.svg"));
  EXPECT_THAT(svg, HasSubstr("val loss"));
  EXPECT_THAT(svg, HasSubstr("<text>step</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("test acc")));
}

TEST(GptCli, BadSizesAndStepsAreRefusedNamingTheFlag) {
  TempDir dir;
  const std::string text = "text:" + corpus(dir);
  CommandResult r = runTandem({"train", "--model", "gpt", "--data", text, "--gpt-width", "30",
                               "--gpt-heads", "4", "--steps", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("width 30 does not divide into 4 heads"));
  r = runTandem({"train", "--model", "gpt", "--data", text, "--context", "16", "--steps", "10",
                 "--eval-every", "4"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--eval-every: 4 does not divide --steps 10"));
  // The model's own warmup outlasting a short run is said in the run's words: steps.
  r = runTandem({"train", "--model", "gpt", "--data", text, "--context", "16", "--steps", "50",
                 "--eval-every", "50"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--steps 50: gpt's warmup of 100 steps leaves its cosine:0.1 "
                               "schedule no steps; train for more steps or give --warmup"));
  r = runTandem({"train", "--model", "gpt", "--data", text, "--context", "16", "--steps", "1",
                 "--eval-every", "1", "--warmup", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("give --warmup below 1 or more --steps"));
  r = runTandem({"train", "--model", "lenet", "--gpt-layers", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--gpt-layers: sizes --model gpt, not lenet"));
  r = runTandem({"train", "--model", "gpt", "--steps", "4"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("gpt is a language model of token ids x"));
}

}  // namespace
}  // namespace tandem::testing
