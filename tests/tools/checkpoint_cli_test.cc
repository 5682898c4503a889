// Checkpoints through the CLI: a run killed with SIGKILL in its third epoch (at a chosen
// step, through TANDEM_TEST_SIGNAL_AFTER of the CLI built with test hooks, so that the
// test is deterministic) and resumed
// prints the same epoch figures and ends with the same parameters as a run never
// interrupted; so does a run stopped by SIGTERM; a bad checkpoint is one line, exit 2,
// and nothing is overwritten.

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {


// The epoch rows of a run's table without the timing columns: epoch, train loss, train
// accuracy, test accuracy.
std::vector<std::string> epochFigures(const std::string& out) {
  std::vector<std::string> rows;
  bool table = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, "train_loss")) {
      table = true;
      continue;
    }
    if (!table || line.empty()) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() < 4) continue;
    rows.push_back(absl::StrCat(cells[0], " ", cells[1], " ", cells[2], " ", cells[3]));
  }
  return rows;
}

// The CSV's columns that do not measure time: epoch, train and test loss and accuracy.
std::vector<std::string> csvFigures(const std::string& text) {
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (cells.size() < 5) continue;
    cells.resize(5);
    rows.push_back(absl::StrJoin(cells, ","));
  }
  return rows;
}

// `args` with `flag` set to `value`: replaced where given (a flag given twice is an error).
std::vector<std::string> withFlag(std::vector<std::string> args, const std::string& flag,
                                  const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) {
      args[i + 1] = value;
      return args;
    }
  args.push_back(flag);
  args.push_back(value);
  return args;
}

class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    writeIdxSplit(data_, "train", 100);
    writeIdxSplit(data_, "t10k", 50);
  }
  std::string dataDir() const {
    std::string d = data_.file("");
    d.pop_back();
    return d;
  }
  // LeNet on 2 devices, 10 steps per epoch, 5 epochs, momentum (optimizer state) on.
  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"train",   "--model", "lenet",     "--data", dataDir(),
                                  "--batch", "10",      "--devices", "2",      "--epochs",
                                  "5",       "--seed",  "3",         "--lr",   "0.05"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  CommandResult runWithSignal(const std::string& point, std::vector<std::string> extra) const {
    setenv("TANDEM_TEST_SIGNAL_AFTER", point.c_str(), 1);
    CommandResult r = runHookedTandem(args(std::move(extra)));
    unsetenv("TANDEM_TEST_SIGNAL_AFTER");
    return r;
  }
  // The uninterrupted run: its table, CSV and final checkpoint.
  void runStraight() {
    straight_ = runTandem(
        args({"--checkpoint", work_.file("straight"), "--metrics", work_.file("straight.csv")}));
    ASSERT_EQ(straight_.exit_code, 0) << straight_.err;
    ASSERT_EQ(epochFigures(straight_.out).size(), 5u) << straight_.out;
  }
  // A resumed run of `dir` must print and end as the uninterrupted one.
  void expectResumeEqualsStraight(const std::string& dir, const std::string& resumed_line) {
    CommandResult resumed = runTandem(args({"--resume", dir, "--metrics", work_.file("r.csv")}));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(resumed.err, "");
    EXPECT_NE(resumed.out.find(resumed_line), std::string::npos) << resumed.out;
    EXPECT_EQ(epochFigures(resumed.out), epochFigures(straight_.out)) << resumed.out;
    EXPECT_EQ(csvFigures(readFile(work_.file("r.csv"))),
              csvFigures(readFile(work_.file("straight.csv"))));
    // The final parameters, momentum and running statistics: the same bytes.
    auto a = runtime::readCheckpointFile(work_.file("straight"));
    auto b = runtime::readCheckpointFile(dir);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(b->epoch, 6);
    ASSERT_EQ(a->tensors.size(), b->tensors.size());
    for (size_t i = 0; i < a->tensors.size(); ++i) {
      EXPECT_EQ(a->tensors[i].name, b->tensors[i].name);
      EXPECT_TRUE(a->tensors[i].bytes == b->tensors[i].bytes) << a->tensors[i].name;
    }
  }

  TempDir data_, work_;
  CommandResult straight_;
};

// Killed after step 6 of epoch 3 with a checkpoint every 4 steps: the last complete one is
// epoch 3, step 4, and the run resumed from it inside the epoch ends as the straight run.
TEST_F(CheckpointCli, KilledInEpochThreeAndResumedInsideTheEpoch) {
  runStraight();
  const std::string dir = work_.file("killed");
  CommandResult killed = runWithSignal("3:6:9", {"--checkpoint", dir, "--checkpoint-every", "4"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  EXPECT_EQ(epochFigures(killed.out).size(), 2u) << killed.out;
  auto last = runtime::readCheckpointFile(dir);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->epoch, 3);
  EXPECT_EQ(last->progress.steps, 4);
  EXPECT_EQ(last->history.size(), 2u);
  expectResumeEqualsStraight(
      dir, absl::StrCat("resumed from '", dir, "/checkpoint' at epoch 3, step 4 of 10\n"));
}

// Killed in epoch 3 with a checkpoint per epoch only: resumed from the end of epoch 2.
TEST_F(CheckpointCli, KilledInEpochThreeAndResumedFromTheEpochBefore) {
  runStraight();
  const std::string dir = work_.file("killed");
  CommandResult killed = runWithSignal("3:7:9", {"--checkpoint", dir});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  expectResumeEqualsStraight(dir,
                             absl::StrCat("resumed from '", dir, "/checkpoint' after epoch 2\n"));
}

// SIGTERM stops after the step and writes the checkpoint of that very step.
TEST_F(CheckpointCli, StoppedBySigtermWritesACheckpointToResume) {
  runStraight();
  const std::string dir = work_.file("stopped");
  CommandResult stopped = runWithSignal("3:6:15", {"--checkpoint", dir});
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM);
  EXPECT_EQ(stopped.err, absl::StrCat("tandem: stopped by SIGTERM in epoch 3 after step 6 of 10 "
                                      "(60 images); the table has every epoch before it; "
                                      "--resume ",
                                      dir, " continues from there\n"));
  expectResumeEqualsStraight(
      dir, absl::StrCat("resumed from '", dir, "/checkpoint' at epoch 3, step 6 of 10\n"));
}

// The bar on the real data set: LeNet killed in its third epoch and resumed ends
// with the same test accuracy (and every other figure) as the run never interrupted.
TEST(CheckpointCliFashionMnist, KilledInEpochThreeEndsWithTheSameTestAccuracy) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir work;
  const std::vector<std::string> base = {
      "train", "--model",      "lenet", "--devices", "2", "--batch", "128", "--limit-train",
      "2560",  "--limit-test", "1000",  "--epochs",  "4", "--seed",  "7"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  CommandResult straight = runTandem(with({"--metrics", work.file("s.csv")}));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  setenv("TANDEM_TEST_SIGNAL_AFTER", "3:13:9", 1);
  CommandResult killed =
      runHookedTandem(with({"--checkpoint", work.file("k"), "--checkpoint-every", "5"}));
  unsetenv("TANDEM_TEST_SIGNAL_AFTER");
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  CommandResult resumed =
      runTandem(with({"--resume", work.file("k"), "--metrics", work.file("r.csv")}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("at epoch 3, step 10 of 20\n"), std::string::npos) << resumed.out;
  EXPECT_EQ(epochFigures(resumed.out), epochFigures(straight.out)) << resumed.out;
  const std::vector<std::string> a = csvFigures(readFile(work.file("s.csv"))),
                                 b = csvFigures(readFile(work.file("r.csv")));
  ASSERT_EQ(a.size(), 5u);  // the header and 4 epochs
  EXPECT_EQ(a, b);
  EXPECT_GE(std::stod(a.back().substr(a.back().rfind(',') + 1)), 0.6) << a.back();
}

// Another device count: the variables are re-split (every device gets the value) and
// training goes on.
TEST_F(CheckpointCli, ResumesOnAnotherDeviceCount) {
  const std::string dir = work_.file("ckpt");
  CommandResult first = runWithSignal("2:5:9", {"--checkpoint", dir, "--checkpoint-every", "5"});
  ASSERT_EQ(first.exit_code, 128 + SIGKILL) << first.err;
  CommandResult resumed = runTandem(withFlag(args({"--resume", dir}), "--devices", "1"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(epochFigures(resumed.out).size(), 5u) << resumed.out;
  EXPECT_EQ(runtime::readCheckpointFile(dir)->devices, 1u);
}

// A checkpoint that cannot be resumed: one line, exit 2, and the file left as it was.
TEST_F(CheckpointCli, BadCheckpointsAreRefusedAndLeftAlone) {
  const std::string dir = work_.file("c");
  ASSERT_EQ(runTandem(withFlag(args({"--checkpoint", dir}), "--epochs", "1")).exit_code, 0);
  const std::string path = runtime::checkpointPath(dir);
  std::string good = readFile(path);
  auto refusedAndKept = [&](const std::string& bytes, std::vector<std::string> flag_value,
                            const std::vector<std::string>& parts) {
    writeFile(path, bytes);
    std::vector<std::string> a = args({"--resume", dir});
    if (!flag_value.empty()) a = withFlag(a, flag_value[0], flag_value[1]);
    CommandResult r = runTandem(a);
    EXPECT_TRUE(isUsageError(r, parts));
    EXPECT_TRUE(readFile(path) == bytes) << "the checkpoint was overwritten";
    EXPECT_FALSE(std::filesystem::exists(runtime::checkpointTempPath(dir)));
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  refusedAndKept(flipped, {}, {path, "is corrupt", "crc32"});
  refusedAndKept(good.substr(0, good.size() - 1), {}, {path, "is truncated"});
  refusedAndKept(good, {"--batch", "20"}, {path, "--batch 10", "--batch 20"});
  refusedAndKept(good, {"--seed", "4"}, {path, "--seed 3", "--seed 4"});
  refusedAndKept(good, {"--precision", "bf16"}, {path, "--precision f32"});
  // A new run does not destroy another run's checkpoint.
  CommandResult fresh = runTandem(args({"--checkpoint", dir}));
  EXPECT_TRUE(isUsageError(fresh, {path, "exists already", "--resume"}));
  EXPECT_TRUE(readFile(path) == good);
}

}  // namespace
}  // namespace tandem::testing
