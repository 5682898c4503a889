// `tandem train` on data other than Fashion-MNIST's IDX files (issue 42): scikit-learn's
// digits as an .npz with a validation split, Fashion-MNIST written as a PNG folder, and
// augmentation (--augment) that is the same on any devices and across a resume.

#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kDigitsCsv[] = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

std::string whyNoDigits() {
  if (::access(kDigitsCsv, R_OK) != 0)
    return absl::StrCat(kDigitsCsv, " is missing (Debian python3-sklearn)");
  return "";
}

// The bar: an MLP on scikit-learn's 1,797 digits, a fifth held out for validation.
TEST(TrainData, DigitsMlpReachesNinetyFivePercentOnItsValidationFifth) {
  TANDEM_NEED_INSTALLED(whyNoDigits());
  TempDir dir;
  const CommandResult wrote = runProgram(
      kPython, {sourcePath("tests/runtime/write_digits_npz.py"), kDigitsCsv, dir.file("d.npz")});
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  const CommandResult r =
      runTandem({"train", "--model", "mlp", "--data", "npz:" + dir.file("d.npz"), "--val-fraction",
                 "0.2", "--metrics", dir.file("m.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 1,797 examples: 359 validate, 1,438 train, at the batch chosen for so few (64).
  EXPECT_NE(r.out.find("batch 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1,438 training images"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("359 test images"), std::string::npos) << r.out;
  const auto rows = readCsv(dir.file("m.csv"));
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_GE(std::stod(rows.back().at("test_acc")), 0.95) << r.out;
  // Another seed splits off other examples.
  const CommandResult other =
      runTandem({"train", "--model", "mlp", "--data", "npz:" + dir.file("d.npz"), "--val-fraction",
                 "0.2", "--epochs", "1", "--seed", "1"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(epochFigures(other.out).front(), epochFigures(r.out).front());
}

// The bar (on a fifth of the data here; docs/PERF.md has the whole of it): Fashion-
// MNIST written as PNG files trains to the same figures as from its IDX files.
TEST(TrainData, PngFolderTrainsToTheIdxFilesFigures) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  const CommandResult wrote =
      runProgram(kPython, {sourcePath("tests/runtime/write_image_folder.py"),
                           "/usr/share/datasets/fashion-mnist", dir.file("png"), "1000"});
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  const std::vector<std::string> common = {"train", "--model", "lenet", "--devices",
                                           "2",     "--batch", "100",   "--epochs",
                                           "2",     "--seed",  "3"};
  std::vector<std::string> idx = common, png = common;
  idx.insert(idx.end(),
             {"--limit-train", "1000", "--limit-test", "1000", "--metrics", dir.file("idx.csv")});
  png.insert(png.end(),
             {"--data", "images:" + dir.file("png/train") + ":by-name", "--test-data",
              "images:" + dir.file("png/test") + ":by-name", "--metrics", dir.file("png.csv")});
  const CommandResult a = runTandem(idx), b = runTandem(png);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_EQ(epochFigures(a.out).size(), 2u) << a.out;
  EXPECT_EQ(epochFigures(b.out), epochFigures(a.out)) << b.out;
  EXPECT_EQ(csvFigures(readFile(dir.file("png.csv"))), csvFigures(readFile(dir.file("idx.csv"))));
}

class Augmented : public ::testing::Test {
 protected:
  std::vector<std::string> args(std::vector<std::string> more) const {
    std::vector<std::string> a = {"train",       "--model",      "lenet", "--batch",
                                  "64",          "--epochs",     "2",     "--limit-train",
                                  "640",         "--limit-test", "320",   "--augment",
                                  "crop:4,flip", "--seed",       "5"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  TempDir work_;
};

// Every crop and flip is drawn from (seed, epoch, example): the first epoch's line is the
// same on one device, two, and two split 3:1.
TEST_F(Augmented, FirstEpochIsTheSameOnOneTwoAndThreeToOneDevices) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  const CommandResult one = runTandem(args({"--devices", "1"}));
  const CommandResult two = runTandem(args({"--devices", "2"}));
  const CommandResult uneven = runTandem(args({"--devices", "2", "--split", "3,1"}));
  const CommandResult plain =
      runTandem({"train", "--model", "lenet", "--batch", "64", "--epochs", "2", "--limit-train",
                 "640", "--limit-test", "320", "--seed", "5"});
  for (const CommandResult* r : {&one, &two, &uneven, &plain}) ASSERT_EQ(r->exit_code, 0) << r->err;
  ASSERT_EQ(epochFigures(one.out).size(), 2u) << one.out;
  EXPECT_EQ(epochFigures(two.out).front(), epochFigures(one.out).front()) << two.out;
  EXPECT_EQ(epochFigures(uneven.out).front(), epochFigures(one.out).front()) << uneven.out;
  // ... and augmentation does change what is trained on.
  EXPECT_NE(epochFigures(plain.out).front(), epochFigures(one.out).front()) << plain.out;
}

// A run killed inside its second epoch resumes to the figures of the run never stopped:
// the resumed epoch's remaining examples get the crops and flips they would have had.
TEST_F(Augmented, AKilledRunResumesToTheSameFigures) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  const CommandResult straight =
      runTandem(args({"--devices", "2", "--metrics", work_.file("s.csv")}));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  setenv("TANDEM_TEST_SIGNAL_AFTER", "2:6:9", 1);
  const CommandResult killed = runHookedTandem(
      args({"--devices", "2", "--checkpoint", work_.file("k"), "--checkpoint-every", "4"}));
  unsetenv("TANDEM_TEST_SIGNAL_AFTER");
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  const CommandResult resumed = runTandem(
      args({"--devices", "2", "--resume", work_.file("k"), "--metrics", work_.file("r.csv")}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("at epoch 2, step 4 of 10"), std::string::npos) << resumed.out;
  EXPECT_EQ(epochFigures(resumed.out), epochFigures(straight.out)) << resumed.out;
  EXPECT_EQ(csvFigures(readFile(work_.file("r.csv"))), csvFigures(readFile(work_.file("s.csv"))));
  // Resuming with other transforms would continue another run: refused.
  std::vector<std::string> other = args({"--devices", "2", "--resume", work_.file("k")});
  for (size_t i = 0; i + 1 < other.size(); ++i)
    if (other[i] == "--augment") other[i + 1] = "flip";
  const CommandResult refused = runTandem(other);
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.err.find("--augment"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace tandem::testing
