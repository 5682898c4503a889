// `tandem train --module FILE`: a module whose execution plan was made from text (dump
// stops after schedule, `tandem opt` runs the plan passes on the file) trains to the same
// figures as the module the flags compile; a stale plan, or a module of other devices, is
// refused naming the file and what is wrong.

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

bool haveData() {
  return std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz");
}

const std::vector<std::string> kModelFlags = {"--model", "lenet", "--devices",  "cpu:0,cpu:1",
                                              "--batch", "64",    "--momentum", "0.9"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// LeNet's step planned from text: compiled up to schedule, then the plan passes by opt.
std::string plannedFromText(const TempDir& dir) {
  auto dumped = runTandem(with(
      {"dump"}, with(kModelFlags, {"--after", "schedule", "--output", dir.file("scheduled.tir")})));
  EXPECT_EQ(dumped.exit_code, 0) << dumped.err;
  auto planned =
      runTandem({"opt", dir.file("scheduled.tir"), "--passes",
                 "assign-streams,plan-events,plan-memory", "--output", dir.file("planned.tir")});
  EXPECT_EQ(planned.exit_code, 0) << planned.err;
  return dir.file("planned.tir");
}

// The epoch rows of a run's table without the timing columns: epoch, loss, accuracies.
std::string figures(const std::string& out) {
  std::string rows;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() == 6 && cells[0] != "epoch")
      absl::StrAppend(&rows, cells[0], " ", cells[1], " ", cells[2], " ", cells[3], "\n");
  }
  return rows;
}

const std::vector<std::string> kRun = {"--epochs",     "1",   "--limit-train", "640",
                                       "--limit-test", "128", "--seed",        "5"};

TEST(TrainModule, APlanMadeFromTextTrainsAsTheCompiledOne) {
  if (!haveData()) GTEST_SKIP() << kData << " is missing (apt-get install dataset-fashion-mnist)";
  TempDir dir;
  const std::string planned = plannedFromText(dir);
  ASSERT_NE(readFile(planned).find("plan {fingerprint="), std::string::npos);
  auto compiled = runTandem(with({"train"}, with(kModelFlags, kRun)));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  auto from_text = runTandem(with({"train"}, with(kModelFlags, with(kRun, {"--module", planned}))));
  ASSERT_EQ(from_text.exit_code, 0) << from_text.err;
  ASSERT_FALSE(figures(compiled.out).empty()) << compiled.out;
  EXPECT_EQ(figures(from_text.out), figures(compiled.out));
}

TEST(TrainModule, AStalePlanIsRefused) {
  if (!haveData()) GTEST_SKIP() << kData << " is missing (apt-get install dataset-fashion-mnist)";
  TempDir dir;
  std::string text = readFile(plannedFromText(dir));
  // The learning rate of one update changes after the plan was made.
  const size_t at = text.find("lr=0.1,");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "lr=0.2,");
  const std::string edited = dir.write("edited.tir", text);
  auto r = runTandem(with({"train"}, with(kModelFlags, with(kRun, {"--module", edited}))));
  EXPECT_TRUE(
      isUsageError(r, {"--module " + edited + ": verifier: the plan of graph @", "is stale"}));
}

TEST(TrainModule, AModuleOfOtherDevicesIsRefused) {
  if (!haveData()) GTEST_SKIP() << kData << " is missing (apt-get install dataset-fashion-mnist)";
  TempDir dir;
  const std::string planned = plannedFromText(dir);
  auto r = runTandem({"train", "--model", "lenet", "--devices", "3", "--batch", "64", "--momentum",
                      "0.9", "--epochs", "1", "--module", planned});
  EXPECT_TRUE(isUsageError(r, {"--module " + planned +
                               ": it runs on [cpu:0, cpu:1], the flags give [cpu:0, cpu:1, "
                               "cpu:2]"}));
}

TEST(TrainModule, AModuleWithoutAPlanIsRefused) {
  if (!haveData()) GTEST_SKIP() << kData << " is missing (apt-get install dataset-fashion-mnist)";
  TempDir dir;
  auto dumped = runTandem(with(
      {"dump"}, with(kModelFlags, {"--after", "schedule", "--output", dir.file("scheduled.tir")})));
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  auto r = runTandem(
      with({"train"}, with(kModelFlags, with(kRun, {"--module", dir.file("scheduled.tir")}))));
  EXPECT_TRUE(isUsageError(r, {"--module " + dir.file("scheduled.tir") +
                               ": graph @init has no memory in its plan: run plan-memory first"}));
}

}  // namespace
}  // namespace tandem::testing
