// Checkpoints through the CLI: a run killed with SIGKILL in its third epoch (at a chosen
// step, through TANDEM_TEST_SIGNAL_AFTER of the CLI built with test hooks, so that the
// test is deterministic) and resumed
// prints the same epoch figures and ends with the same parameters as a run never
// interrupted; so does a run stopped by SIGTERM; a bad checkpoint is one line, exit 2,
// and nothing is overwritten.

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
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
    for (size_t i = 0; i + 1 < optimizer_.size(); i += 2)
      a = withFlag(std::move(a), optimizer_[i], optimizer_[i + 1]);
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
  /// Flag-value pairs that replace or extend the base flags (another optimizer).
  std::vector<std::string> optimizer_;
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

// AdamW's state (both moments and the per-parameter step count, which its bias correction
// reads) comes back bit for bit from a checkpoint taken mid-epoch: the resumed run prints
// and ends as the uninterrupted one.
TEST_F(CheckpointCli, AdamwKilledMidEpochResumesBitForBit) {
  optimizer_ = {"--optimizer", "adamw", "--lr",           "0.002",
                "--beta2",     "0.99",  "--weight-decay", "0.05"};
  runStraight();
  EXPECT_NE(
      straight_.out.find("adamw lr 0.002, beta1 0.9, beta2 0.99, eps 1e-08, weight decay 0.05"),
      std::string::npos)
      << straight_.out;
  const std::string dir = work_.file("killed");
  CommandResult killed = runWithSignal("3:6:9", {"--checkpoint", dir, "--checkpoint-every", "4"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  auto last = runtime::readCheckpointFile(dir);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->progress.steps, 4);
  // 2 epochs of 10 steps and 4 more: every parameter's count says 24.
  size_t counts = 0;
  for (const runtime::CheckpointTensor& t : last->tensors)
    if (absl::EndsWith(t.name, ".step")) {
      ++counts;
      float step = 0;
      ASSERT_EQ(t.bytes.size(), sizeof step) << t.name;
      std::memcpy(&step, t.bytes.data(), sizeof step);
      EXPECT_EQ(step, 24.0f) << t.name;
    }
  EXPECT_EQ(counts, 8u);  // LeNet's 8 parameters (4 layers' weights and biases)
  expectResumeEqualsStraight(
      dir, absl::StrCat("resumed from '", dir, "/checkpoint' at epoch 3, step 4 of 10\n"));

  // Resuming with other AdamW settings is refused, naming the setting.
  CommandResult other = runTandem(withFlag(args({"--resume", dir}), "--beta2", "0.999"));
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("was written with --beta2 0.99; this run has --beta2 0.999"),
            std::string::npos)
      << other.err;
}

// Under a learning-rate schedule (warmup, then cosine over the run) the factor of every
// update is a function of its index in the run: a run killed mid-epoch and resumed feeds
// the factors the uninterrupted run did, so it prints (lr column included) and ends the same.
TEST_F(CheckpointCli, ScheduledRunKilledMidEpochResumesBitForBit) {
  optimizer_ = {"--optimizer", "adamw", "--lr", "0.002", "--schedule", "cosine", "--warmup", "7"};
  runStraight();
  EXPECT_NE(straight_.out.find("schedule cosine after 7 warmup steps"), std::string::npos)
      << straight_.out;
  EXPECT_NE(straight_.out.find(" lr\n"), std::string::npos) << straight_.out;
  const std::string dir = work_.file("killed");
  CommandResult killed = runWithSignal("3:6:9", {"--checkpoint", dir, "--checkpoint-every", "4"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  expectResumeEqualsStraight(
      dir, absl::StrCat("resumed from '", dir, "/checkpoint' at epoch 3, step 4 of 10\n"));

  // Another schedule is refused, naming the flag.
  CommandResult other = runTandem(withFlag(args({"--resume", dir}), "--warmup", "3"));
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("was written with --warmup 7; this run has --warmup 3"),
            std::string::npos)
      << other.err;
}

// A model's own warmup (vit: one epoch) in a run no longer than it is a tenth of the run,
// so `--epochs 1` trains; a longer run keeps the model's. The warmup is a setting of the
// checkpoint: resuming a one-epoch run for more epochs names the --warmup to give.
TEST_F(CheckpointCli, AModelsWarmupFollowsARunNoLongerThanIt) {
  const std::string dir = work_.file("vit");
  CommandResult one =
      runTandem(withFlag(withFlag(args({"--checkpoint", dir}), "--model", "vit"), "--epochs", "1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("schedule cosine after 1 warmup steps"), std::string::npos) << one.out;
  EXPECT_EQ(epochFigures(one.out).size(), 1u) << one.out;
  CommandResult two = runTandem(withFlag(withFlag(args({}), "--model", "vit"), "--epochs", "2"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.out.find("schedule cosine after 10 warmup steps"), std::string::npos) << two.out;
  CommandResult longer =
      runTandem(withFlag(withFlag(args({"--resume", dir}), "--model", "vit"), "--epochs", "3"));
  EXPECT_EQ(longer.exit_code, 2) << longer.err;
  EXPECT_NE(longer.err.find("was written with --warmup 1; this run has --warmup 10"),
            std::string::npos)
      << longer.err;
  CommandResult given = runTandem(
      withFlag(withFlag(withFlag(args({"--resume", dir}), "--model", "vit"), "--epochs", "3"),
               "--warmup", "1"));
  EXPECT_EQ(given.exit_code, 0) << given.err;
}

// With label smoothing the resumed run computes the same smoothed loss: it prints and ends
// as the run never interrupted. The setting is listed in the checkpoint only when given
// (a checkpoint written before the flag resumes), and must then match.
TEST_F(CheckpointCli, LabelSmoothedRunKilledMidEpochResumesBitForBit) {
  optimizer_ = {"--label-smoothing", "0.1"};
  runStraight();
  EXPECT_NE(straight_.out.find(", label smoothing 0.1,"), std::string::npos) << straight_.out;
  const std::string dir = work_.file("killed");
  CommandResult killed = runWithSignal("3:6:9", {"--checkpoint", dir, "--checkpoint-every", "4"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  expectResumeEqualsStraight(
      dir, absl::StrCat("resumed from '", dir, "/checkpoint' at epoch 3, step 4 of 10\n"));

  CommandResult other = runTandem(withFlag(args({"--resume", dir}), "--label-smoothing", "0.2"));
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("was written with --label-smoothing 0.1; this run has "
                           "--label-smoothing 0.2"),
            std::string::npos)
      << other.err;
}

// Issue 41: checkpoints store their settings by key (weight_decay); one written before,
// whose settings are `tandem train`'s flags (--weight-decay), still resumes and ends as the
// run never interrupted.
TEST_F(CheckpointCli, ACheckpointOfTheFlagsBeforeIssue41Resumes) {
  runStraight();
  const std::string dir = work_.file("old");
  CommandResult killed = runWithSignal("3:6:9", {"--checkpoint", dir, "--checkpoint-every", "4"});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  absl::StatusOr<runtime::Checkpoint> c = runtime::readCheckpointFile(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_FALSE(c->settings.empty());
  for (auto& [key, value] : c->settings) {
    ASSERT_FALSE(absl::StartsWith(key, "--")) << key;
    std::replace(key.begin(), key.end(), '_', '-');
    key = "--" + key;
  }
  ASSERT_TRUE(runtime::writeCheckpointFile(dir, *c).ok());
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

// The issue's bar on the real data set: LeNet killed in its third epoch and resumed ends
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

// Issue 27, the sharded weight update (--shard-updates: per bucket a reduce_scatter, each
// device steps its shard with its shard of the optimizer state, an all_gather): the same
// epoch figures and, in the checkpoint (the sharded state gathered under the unsharded
// variables' names, as a checkpoint of the replicated run has them), the same bytes.

// name -> bytes of a checkpoint's tensors (a sharded run writes its state in bucket order).
std::map<std::string, std::string> checkpointBytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  absl::StatusOr<runtime::Checkpoint> c = runtime::readCheckpointFile(dir);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return out;
  for (const runtime::CheckpointTensor& t : c->tensors)
    out[absl::StrCat(t.name, t.replica ? absl::StrCat("#", t.replica) : "")] = t.bytes;
  return out;
}

class ShardedUpdate : public CheckpointCli {
 protected:
  // Trains `flags` (pairs replacing or extending the fixture's) without and with
  // --shard-updates: the same figures, the same checkpoint bytes.
  void expectSameBits(const std::vector<std::string>& flags) {
    std::vector<std::string> base = args({});
    for (size_t i = 0; i + 1 < flags.size(); i += 2) base = withFlag(base, flags[i], flags[i + 1]);
    const std::string tag = absl::StrJoin(flags, "_");
    const std::string plain = work_.file(tag + "plain"), sharded = work_.file(tag + "sharded");
    std::vector<std::string> a = base, b = base;
    a.insert(a.end(), {"--checkpoint", plain});
    b.insert(b.end(), {"--checkpoint", sharded, "--shard-updates"});
    const CommandResult replicated = runTandem(a);
    ASSERT_EQ(replicated.exit_code, 0) << replicated.err;
    const CommandResult shards = runTandem(b);
    ASSERT_EQ(shards.exit_code, 0) << shards.err;
    EXPECT_FALSE(epochFigures(replicated.out).empty()) << replicated.out;
    EXPECT_EQ(epochFigures(shards.out), epochFigures(replicated.out)) << shards.out;
    const auto want = checkpointBytes(plain), got = checkpointBytes(sharded);
    EXPECT_GT(want.size(), 8u);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, bytes] : want) {
      ASSERT_TRUE(got.contains(name)) << name;
      EXPECT_TRUE(got.at(name) == bytes) << name;
    }
  }
  // The uninterrupted run, then a sharded one killed mid-epoch that checkpoints to `dir`
  // every 4 steps; `copy` gets a copy of that checkpoint to resume another way.
  void runStraightAndKillSharded(const std::string& dir, const std::string& copy) {
    runStraight();
    CommandResult killed =
        runWithSignal("3:6:9", {"--checkpoint", dir, "--checkpoint-every", "4", "--shard-updates"});
    ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
    std::filesystem::copy(dir, copy);
    std::filesystem::remove(copy + "/checkpoint.lock");
  }
};

TEST_F(ShardedUpdate, LenetSgdMomentumIsTheReplicatedUpdateBitForBit) {
  expectSameBits({"--epochs", "2", "--momentum", "0.9", "--weight-decay", "0.0005"});
}

TEST_F(ShardedUpdate, UnevenSplitAndUnevenShardsAreTheReplicatedBits) {
  // --split 3,1 gives the devices 3:1 of each batch; 3 devices cut LeNet's bucket of
  // 129,068 elements unevenly (43,023 + 43,023 + 43,022).
  expectSameBits({"--epochs", "2", "--momentum", "0.9", "--split", "3,1"});
  expectSameBits({"--epochs", "1", "--momentum", "0.9", "--devices", "3", "--batch", "12"});
}

TEST_F(ShardedUpdate, AdamwAndScheduleAreTheReplicatedBits) {
  expectSameBits({"--epochs", "2", "--optimizer", "adamw", "--lr", "0.002", "--schedule", "cosine",
                  "--warmup", "3"});
}

TEST_F(ShardedUpdate, Bf16WireAndSmallBucketsAreTheReplicatedBits) {
  // Several buckets (0.1 MiB caps: the first holds fc2 and fc1's bias) and bf16 sums.
  expectSameBits({"--epochs", "1", "--momentum", "0.9", "--allreduce-dtype", "bf16", "--bucket-mb",
                  "0.1", "--first-bucket-mb", "0.01"});
}

TEST_F(ShardedUpdate, VitAdamwIsTheReplicatedUpdateBitForBit) {
  // The issue's command: vit's own warmup of one epoch becomes a tenth of a one-epoch run.
  expectSameBits({"--model", "vit", "--epochs", "1", "--optimizer", "adamw"});
}

TEST_F(ShardedUpdate, HierarchicalGroupsAreTheReplicatedBits) {
  // --allreduce-groups: sharded within each group, the groups' shards all-reduced across
  // them. 4 devices in 2 groups (even shards); 6 in 2 groups cut LeNet's bucket of 129,068
  // elements into 43,023 + 43,023 + 43,022 in each group; AdamW's state likewise.
  expectSameBits({"--epochs", "1", "--momentum", "0.9", "--devices", "4", "--allreduce-groups", "2",
                  "--batch", "12"});
  expectSameBits({"--epochs", "1", "--optimizer", "adamw", "--lr", "0.002", "--devices", "6",
                  "--allreduce-groups", "2", "--batch", "12"});
  // 3 groups of 2: the all_reduce across the groups adds three shards.
  expectSameBits({"--epochs", "1", "--momentum", "0.9", "--devices", "6", "--allreduce-groups", "3",
                  "--batch", "12", "--split", "3,1,1,2,1,1"});
}

// A hierarchically sharded run killed mid-epoch resumes into the groups' shards and ends as
// the uninterrupted one; its checkpoint resumes flat-sharded on 2 devices too.
TEST_F(ShardedUpdate, HierarchicalKilledAndResumedIsTheStraightRun) {
  optimizer_ = {"--momentum", "0.9", "--devices", "4", "--allreduce-groups", "2", "--batch", "12"};
  const std::string dir = work_.file("killed"), copy = work_.file("copy");
  ASSERT_NO_FATAL_FAILURE(runStraightAndKillSharded(dir, copy));
  CommandResult resumed = runTandem(args({"--resume", dir, "--shard-updates"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(epochFigures(resumed.out), epochFigures(straight_.out)) << resumed.out;
  EXPECT_EQ(checkpointBytes(dir), checkpointBytes(work_.file("straight")));
  optimizer_ = {"--momentum", "0.9", "--batch", "12"};
  CommandResult flat = runTandem(args({"--resume", copy, "--shard-updates"}));
  ASSERT_EQ(flat.exit_code, 0) << flat.err;
  EXPECT_EQ(epochFigures(flat.out).size(), epochFigures(straight_.out).size()) << flat.out;
}

// A sharded run killed mid-epoch resumes from its checkpoint (the gathered state cut into
// shards again) and ends as the uninterrupted replicated run; its checkpoint also resumes
// without sharding and on one device.
TEST_F(ShardedUpdate, KilledAndResumedIsTheReplicatedRun) {
  optimizer_ = {"--momentum", "0.9"};
  const std::string dir = work_.file("killed"), copy = work_.file("copy");
  ASSERT_NO_FATAL_FAILURE(runStraightAndKillSharded(dir, copy));
  CommandResult resumed =
      runTandem(args({"--resume", dir, "--shard-updates", "--metrics", work_.file("r.csv")}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(epochFigures(resumed.out), epochFigures(straight_.out)) << resumed.out;
  EXPECT_EQ(checkpointBytes(dir), checkpointBytes(work_.file("straight")));
  // The same checkpoint, resumed replicated: the same run again.
  CommandResult plain = runTandem(args({"--resume", copy}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(epochFigures(plain.out), epochFigures(straight_.out)) << plain.out;
  EXPECT_EQ(checkpointBytes(copy), checkpointBytes(work_.file("straight")));
}

TEST_F(ShardedUpdate, AReplicatedCheckpointResumesShardedOnAnotherDeviceCount) {
  optimizer_ = {"--momentum", "0.9"};
  const std::string dir = work_.file("ckpt");
  CommandResult first = runWithSignal("2:5:9", {"--checkpoint", dir, "--checkpoint-every", "5"});
  ASSERT_EQ(first.exit_code, 128 + SIGKILL) << first.err;
  CommandResult resumed =
      runTandem(withFlag(args({"--resume", dir, "--shard-updates"}), "--devices", "3"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(epochFigures(resumed.out).size(), 5u) << resumed.out;
  EXPECT_EQ(runtime::readCheckpointFile(dir)->devices, 3u);
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

// Issue 21, class 7: a directory another run writes checkpoints to is locked (flock on
// DIR/checkpoint.lock, which names the holder): a second run is refused naming it, before
// anything is written. Two runs started together on one new directory: one trains, the
// other is refused, and the checkpoint is whole (they used to share checkpoint.tmp).
TEST_F(CheckpointCli, ADirectoryInUseByAnotherRunIsRefusedNamingTheHolder) {
  const std::string dir = work_.file("shared");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const int fd = open(runtime::checkpointLockPath(dir).c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string holder = "pid 4242 on elsewhere\n";
  ASSERT_EQ(write(fd, holder.data(), holder.size()), static_cast<ssize_t>(holder.size()));
  EXPECT_TRUE(isUsageError(runTandem(args({"--checkpoint", dir})),
                           {absl::StrCat("--checkpoint: '", dir,
                                         "' is in use by another run (pid 4242 on elsewhere); wait "
                                         "for it to end, or write to another directory")}));
  EXPECT_FALSE(std::filesystem::exists(runtime::checkpointPath(dir)));
  close(fd);  // released (as by the holder's exit, however it ends): the directory is free
  const CommandResult free_now = runTandem(withFlag(args({"--checkpoint", dir}), "--epochs", "1"));
  EXPECT_EQ(free_now.exit_code, 0) << free_now.err;

  const std::string both = work_.file("both");
  const std::vector<std::string> a = withFlag(args({"--checkpoint", both}), "--epochs", "2");
  std::vector<std::pair<pid_t, std::string>> runs;
  for (int i = 0; i < 2; ++i) {
    const std::string err = work_.file(absl::StrCat("err", i));
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (std::freopen(err.c_str(), "w", stderr) == nullptr) _exit(126);
      if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
      std::vector<char*> argv = {const_cast<char*>(TANDEM_CLI_PATH)};
      for (const std::string& arg : a) argv.push_back(const_cast<char*>(arg.c_str()));
      argv.push_back(nullptr);
      execv(TANDEM_CLI_PATH, argv.data());
      _exit(127);
    }
    runs.push_back({pid, err});
  }
  int succeeded = 0;
  for (const auto& [pid, err] : runs) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0) {
      ++succeeded;
      continue;
    }
    EXPECT_EQ(WEXITSTATUS(status), 2);
    const std::string text = readFile(err);
    // The loser may look between the winner's lock and its pid: "(which has not written
    // its pid yet)" is the same refusal.
    EXPECT_TRUE(absl::StrContains(text, "is in use by another run (pid ") ||
                absl::StrContains(text, "is in use by another run (which has not written its "
                                        "pid yet)") ||
                absl::StrContains(text, "exists already"))
        << text;
  }
  EXPECT_EQ(succeeded, 1);
  auto whole = runtime::readCheckpointFile(both);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->epoch, 3);
  EXPECT_TRUE(runtime::checkpointTempFiles(both).empty());
}

// Issue 21, class 10: a full disk (here a file-size limit: the same EFBIG/ENOSPC to the
// writer) fails the run naming the file, and leaves neither a partial checkpoint
// temporary nor a truncated trace behind.
TEST_F(CheckpointCli, AFullDiskLeavesNoPartialFiles) {
  auto limited = [&](const std::vector<std::string>& more) {
    std::string command = "trap '' XFSZ; ulimit -f 100; exec " + std::string(TANDEM_CLI_PATH);
    for (const std::string& arg : withFlag(args(more), "--epochs", "1"))
      command += " '" + arg + "'";
    return runProgram("/bin/sh", {"-c", command});  // 100 blocks of 512 bytes
  };
  const std::string dir = work_.file("full");
  const CommandResult checkpoint = limited({"--checkpoint", dir});
  EXPECT_EQ(checkpoint.exit_code, 2) << checkpoint.err;
  EXPECT_TRUE(absl::StartsWith(checkpoint.err, absl::StrCat("tandem: --checkpoint: cannot write '",
                                                            dir, "/checkpoint.tmp.")))
      << checkpoint.err;
  EXPECT_TRUE(absl::EndsWith(checkpoint.err, "': File too large\n")) << checkpoint.err;
  EXPECT_TRUE(runtime::checkpointTempFiles(dir).empty());
  EXPECT_FALSE(std::filesystem::exists(runtime::checkpointPath(dir)));
  const std::string trace = work_.file("t.json");
  const CommandResult traced = limited({"--trace", trace});
  EXPECT_EQ(traced.exit_code, 2) << traced.err;
  EXPECT_TRUE(absl::EndsWith(
      traced.err, absl::StrCat("tandem: --trace: cannot write '", trace, "': File too large\n")))
      << traced.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
  for (const auto& entry : std::filesystem::directory_iterator(work_.file("")))
    EXPECT_EQ(entry.path().filename().string().find(".t.json."), std::string::npos) << entry.path();
}

// Issue 21, class 8: --split auto re-plans from measured speeds, which vary run to run.
// Every re-plan is in the table, the CSV (its step and split) and the checkpoint, with the
// balancer's state, so that a resumed run re-plans where the run it continues would: with
// the speeds fixed (TANDEM_TEST_DEVICE_SPEEDS of the CLI built with test hooks: device 1 twice as
// slow), a run killed between the two decisions and resumed ends with the figures and bits of the
// run never stopped.
TEST_F(CheckpointCli, SplitAutoReplansAreKeptAndReplayedOnResume) {
  setenv("TANDEM_TEST_DEVICE_SPEEDS", "1,2", 1);
  auto split = [&](std::vector<std::string> more) {
    std::vector<std::string> a =
        withFlag(withFlag(args({"--split", "auto"}), "--batch", "12"), "--epochs", "3");
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const CommandResult straight =
      runHookedTandem(split({"--checkpoint", work_.file("s"), "--metrics", work_.file("s.csv")}));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  EXPECT_TRUE(absl::StrContains(
      straight.out, "split re-planned after step 6 of epoch 1: 8/4 images per device (busy "))
      << straight.out;
  const std::vector<std::string> csv = absl::StrSplit(readFile(work_.file("s.csv")), '\n');
  ASSERT_GE(csv.size(), 4u);
  EXPECT_TRUE(absl::EndsWith(csv[0], ",split,replans")) << csv[0];
  EXPECT_TRUE(absl::EndsWith(csv[1], ",8/4,6:8/4")) << csv[1];
  EXPECT_TRUE(absl::EndsWith(csv[2], ",8/4,")) << csv[2];  // measured even: settled
  setenv("TANDEM_TEST_SIGNAL_AFTER", "2:2:9", 1);
  const CommandResult killed =
      runHookedTandem(split({"--checkpoint", work_.file("k"), "--checkpoint-every", "1"}));
  unsetenv("TANDEM_TEST_SIGNAL_AFTER");
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  auto saved = runtime::readCheckpointFile(work_.file("k"));
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->replans.size(), 1u);
  EXPECT_EQ(saved->replans[0], (runtime::SplitReplan{1, 6, {8, 4}}));
  ASSERT_TRUE(saved->balancer.has_value());
  EXPECT_FALSE(saved->balancer->settled);
  const CommandResult resumed =
      runHookedTandem(split({"--resume", work_.file("k"), "--metrics", work_.file("r.csv")}));
  unsetenv("TANDEM_TEST_DEVICE_SPEEDS");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(absl::StrContains(resumed.out,
                                "split re-planned after step 6 of epoch 1: 8/4 "
                                "images per device (in the run resumed)"))
      << resumed.out;
  EXPECT_EQ(epochFigures(resumed.out), epochFigures(straight.out)) << resumed.out;
  EXPECT_EQ(csvFigures(readFile(work_.file("r.csv"))), csvFigures(readFile(work_.file("s.csv"))));
  auto a = runtime::readCheckpointFile(work_.file("s"));
  auto b = runtime::readCheckpointFile(work_.file("k"));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->replans, b->replans);
  EXPECT_EQ(a->balancer, b->balancer);
  ASSERT_EQ(a->tensors.size(), b->tensors.size());
  for (size_t i = 0; i < a->tensors.size(); ++i)
    EXPECT_TRUE(a->tensors[i].bytes == b->tensors[i].bytes) << a->tensors[i].name;
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
    EXPECT_TRUE(runtime::checkpointTempFiles(dir).empty());
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
