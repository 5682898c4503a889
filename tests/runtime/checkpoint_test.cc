// Checkpoints: the format round-trips every field exactly, every corruption is an error
// naming the file, a write killed halfway leaves the last checkpoint intact, variables
// come back on every device (re-split on another count), and an epoch resumed from a
// checkpoint ends with the same bits as one never interrupted.

#include "runtime/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/runtime/runtime_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using runtime::Checkpoint;
using runtime::CheckpointTensor;

class ScratchDir {
 public:
  ScratchDir() {
    char name[] = "/tmp/tandem_ckpt_testXXXXXX";
    if (mkdtemp(name) != nullptr) path_ = name;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

ir::TensorType f32(std::initializer_list<int64_t> shape) {
  return {ir::DType::kF32, ir::Shape(shape)};
}

std::string bytesOf(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A checkpoint of a run on `devices` devices at the start of its first epoch: the position
// and split that decoding checks (impossible contents are refused), nothing else set.
Checkpoint startOfRun(uint32_t devices) {
  Checkpoint c;
  c.devices = devices;
  c.steps_per_epoch = 1;
  c.split.assign(devices, 1);
  return c;
}

// The sample's figures one epoch further on: epoch `epoch`, with the figures of every
// epoch before it (a checkpoint's history is its finished epochs).
Checkpoint advanceTo(Checkpoint c, int32_t epoch) {
  while (static_cast<int32_t>(c.history.size()) < epoch - 1) {
    runtime::EpochFigures next = c.history.back();
    next.epoch = static_cast<int32_t>(c.history.size()) + 1;
    c.history.push_back(next);
  }
  c.epoch = epoch;
  return c;
}

// A small checkpoint with every field set, figures that only exact bits preserve
// included (a NaN, -0, the smallest subnormal).
Checkpoint sample() {
  Checkpoint c;
  c.model = "lenet";
  c.settings = {{"--batch", "10"}, {"--seed", "3"}, {"--lr", "0.1"}};
  c.seed = 0xfedcba9876543210ull;
  c.epoch = 3;
  c.progress = {.steps = 4, .examples = 40, .correct = 17, .loss_sum = 0.1 + 0.2, .seconds = 1.5};
  c.steps_per_epoch = 10;
  c.devices = 2;
  c.split = {6, 4};
  c.history = {{1, 2.30258509299, 0.1, 2.3, 0.12, 0.5, 200, 0.01, {5, 5}},
               {2,
                std::numeric_limits<double>::quiet_NaN(),
                -0.0,
                std::numeric_limits<double>::denorm_min(),
                1,
                1e300,
                3,
                4,
                {6, 4}}};
  c.history[0].train_metrics = {{"accuracy", 0.1}, {"top5", 0.5}};
  c.history[0].test_metrics = {{"accuracy", 0.12}, {"top5", 0.625}};
  c.history[1].train_metrics = {{"tokens", 4096}};  // a model's own, any name
  c.replans = {{1, 7, {6, 4}}, {3, 2, {6, 4}}};
  c.balancer = runtime::SplitBalancer::State{3, false, {1.5e6, 2.5e6}, {6, 4}};
  c.tensors = {{"w", 0, f32({2, 3}), bytesOf({1, 2, 3, 4, 5, 6})},
               {"bn.mean", 0, f32({2}), bytesOf({0.5f, -0.5f})},
               {"bn.mean", 1, f32({2}), bytesOf({0.25f, -0.25f})},
               {"s", 0, {ir::DType::kI32, ir::Shape{}}, std::string(4, '\x07')}};
  return c;
}

void expectSameBits(double a, double b) {
  uint64_t x, y;
  std::memcpy(&x, &a, 8);
  std::memcpy(&y, &b, 8);
  EXPECT_EQ(x, y) << a << " vs " << b;
}

// Every replica of every variable, compared by its bytes (== on floats would take -0 for 0).
::testing::AssertionResult sameBits(const Snapshot& a, const Snapshot& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "variable counts differ";
  for (const auto& [name, replicas] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != replicas.size())
      return ::testing::AssertionFailure() << "@" << name << " differs in its replicas";
    for (size_t d = 0; d < replicas.size(); ++d)
      if (replicas[d].size() != it->second[d].size() ||
          std::memcmp(replicas[d].data(), it->second[d].data(), replicas[d].size() * 4) != 0)
        return ::testing::AssertionFailure() << "@" << name << " differs on device " << d;
  }
  return ::testing::AssertionSuccess();
}

void expectSame(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.settings, b.settings);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.progress.steps, b.progress.steps);
  EXPECT_EQ(a.progress.examples, b.progress.examples);
  EXPECT_EQ(a.progress.correct, b.progress.correct);
  expectSameBits(a.progress.loss_sum, b.progress.loss_sum);
  expectSameBits(a.progress.seconds, b.progress.seconds);
  EXPECT_EQ(a.steps_per_epoch, b.steps_per_epoch);
  EXPECT_EQ(a.devices, b.devices);
  EXPECT_EQ(a.split, b.split);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t i = 0; i < a.history.size(); ++i) {
    const runtime::EpochFigures &x = a.history[i], &y = b.history[i];
    EXPECT_EQ(x.epoch, y.epoch);
    for (auto field : {&runtime::EpochFigures::train_loss, &runtime::EpochFigures::train_accuracy,
                       &runtime::EpochFigures::test_loss, &runtime::EpochFigures::test_accuracy,
                       &runtime::EpochFigures::seconds, &runtime::EpochFigures::images_per_second,
                       &runtime::EpochFigures::eval_seconds})
      expectSameBits(x.*field, y.*field);
  }
  for (size_t i = 0; i < a.history.size(); ++i) {
    EXPECT_EQ(a.history[i].split, b.history[i].split);
    EXPECT_EQ(a.history[i].train_metrics, b.history[i].train_metrics);
    EXPECT_EQ(a.history[i].test_metrics, b.history[i].test_metrics);
  }
  EXPECT_EQ(a.replans, b.replans);
  EXPECT_EQ(a.balancer, b.balancer);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].replica, b.tensors[i].replica);
    EXPECT_EQ(a.tensors[i].type, b.tensors[i].type);
    EXPECT_EQ(a.tensors[i].bytes, b.tensors[i].bytes);
  }
}

TEST(CheckpointFormat, RoundTripsEveryFieldExactly) {
  const Checkpoint c = sample();
  const std::string bytes = runtime::encodeCheckpoint(c);
  EXPECT_EQ(bytes.substr(0, 8), "TNDMCKPT");
  auto back = runtime::decodeCheckpoint(bytes, "x/checkpoint");
  ASSERT_TRUE(back.ok()) << back.status();
  expectSame(c, *back);
  EXPECT_EQ(runtime::encodeCheckpoint(*back), bytes);
}

TEST(CheckpointFormat, FileRoundTripLeavesNoTemporaryFile) {
  ScratchDir dir;
  ASSERT_TRUE(runtime::writeCheckpointFile(dir.path(), sample()).ok());
  EXPECT_TRUE(runtime::checkpointTempFiles(dir.path()).empty());
  auto back = runtime::readCheckpointFile(dir.path());
  ASSERT_TRUE(back.ok()) << back.status();
  expectSame(sample(), *back);
  // A second write replaces the first.
  Checkpoint next = advanceTo(sample(), 4);
  ASSERT_TRUE(runtime::writeCheckpointFile(dir.path(), next).ok());
  EXPECT_EQ(runtime::readCheckpointFile(dir.path())->epoch, 4);
}

TEST(CheckpointFormat, MissingFile) {
  ScratchDir dir;
  auto r = runtime::readCheckpointFile(dir.path());
  EXPECT_EQ(r.status().message(),
            absl::StrCat("cannot read '", dir.path(),
                         "/checkpoint': No such file or directory (no checkpoint was written in "
                         "that directory)"));
}

TEST(CheckpointFormat, EveryTruncationIsAnError) {
  const std::string bytes = runtime::encodeCheckpoint(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = runtime::decodeCheckpoint(bytes.substr(0, n), "d/checkpoint");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.status().message().find("'d/checkpoint' is truncated: "), std::string::npos)
        << n << ": " << r.status();
  }
  EXPECT_EQ(runtime::decodeCheckpoint(bytes.substr(0, 100), "d/checkpoint").status().message(),
            absl::StrCat("'d/checkpoint' is truncated: 100 of its ", bytes.size(), " bytes"));
}

TEST(CheckpointFormat, EveryFlippedBitIsAnError) {
  const std::string bytes = runtime::encodeCheckpoint(sample());
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      auto r = runtime::decodeCheckpoint(bad, "d/checkpoint");
      ASSERT_FALSE(r.ok()) << "byte " << i << " bit " << bit;
      EXPECT_EQ(r.status().message().rfind("'d/checkpoint' ", 0), 0u) << r.status();
      if (i >= 20) {  // past magic, version and size: only the checksum can tell
        EXPECT_NE(r.status().message().find("is corrupt: its content has crc32 "),
                  std::string::npos)
            << "byte " << i << ": " << r.status();
      }
    }
}

TEST(CheckpointFormat, HeaderErrorsSayWhatIsWrong) {
  const std::string bytes = runtime::encodeCheckpoint(sample());
  auto message = [](const std::string& b) {
    return std::string(runtime::decodeCheckpoint(b, "d/checkpoint").status().message());
  };
  EXPECT_EQ(message("module @m {}\n"),
            "'d/checkpoint' is not a Tandem checkpoint (it does not start with TNDMCKPT)");
  EXPECT_EQ(message(""), "'d/checkpoint' is truncated: 0 bytes, not even the 8-byte magic");
  std::string v4 = bytes;
  v4[8] = 4;
  EXPECT_EQ(message(v4),
            "'d/checkpoint' has checkpoint format version 4; this tandem reads versions 1 to 3");
  std::string v0 = bytes;
  v0[8] = 0;
  EXPECT_EQ(message(v0),
            "'d/checkpoint' has checkpoint format version 0; this tandem reads versions 1 to 3");
  EXPECT_EQ(message(bytes + "x"),
            absl::StrCat("'d/checkpoint' has ", bytes.size() + 1, " bytes, but its header says ",
                         bytes.size(), " (appended to, or a corrupt header)"));
  std::string flipped = bytes;
  flipped[40] ^= 1;
  EXPECT_EQ(message(flipped).rfind("'d/checkpoint' is corrupt: its content has crc32 ", 0), 0u);
  EXPECT_NE(message(flipped).find("is stored (flipped bytes)"), std::string::npos);
}

// Version 1 (before --split auto's re-plans were kept) still reads: the same run's
// position, figures and tensors, without re-plans or balancer state.
TEST(CheckpointFormat, VersionOneStillReads) {
  Checkpoint old = sample();
  old.replans.clear();
  old.balancer.reset();
  for (runtime::EpochFigures& h : old.history) {
    h.split.clear();
    h.train_metrics.clear();
    h.test_metrics.clear();
  }
  const std::string bytes = runtime::encodeCheckpoint(old, /*version=*/1);
  EXPECT_EQ(bytes[8], 1);
  EXPECT_LT(bytes.size(), runtime::encodeCheckpoint(old).size());
  auto back = runtime::decodeCheckpoint(bytes, "v1/checkpoint");
  ASSERT_TRUE(back.ok()) << back.status();
  expectSame(old, *back);
}

// Version 2 (before each epoch's metrics were kept by name) still reads: all but those.
TEST(CheckpointFormat, VersionTwoStillReads) {
  Checkpoint old = sample();
  for (runtime::EpochFigures& h : old.history) {
    h.train_metrics.clear();
    h.test_metrics.clear();
  }
  const std::string bytes = runtime::encodeCheckpoint(old, /*version=*/2);
  EXPECT_EQ(bytes[8], 2);
  EXPECT_EQ(bytes.size() + 2 * 4 * old.history.size(), runtime::encodeCheckpoint(old).size());
  auto back = runtime::decodeCheckpoint(bytes, "v2/checkpoint");
  ASSERT_TRUE(back.ok()) << back.status();
  expectSame(old, *back);
}

// Issue 21, class 10: a checksum says the bytes are the ones written, not that they make
// sense: values no run could reach are refused, naming what is impossible.
TEST(CheckpointFormat, ImpossibleContentsBehindAValidChecksum) {
  auto message = [](const Checkpoint& c) {
    return std::string(
        runtime::decodeCheckpoint(runtime::encodeCheckpoint(c), "d/checkpoint").status().message());
  };
  const std::string prefix = "'d/checkpoint' holds impossible contents: ";
  const std::string suffix = " (its checksum matches: written by a broken tandem, or edited)";
  Checkpoint c = sample();
  c.epoch = -5;
  EXPECT_EQ(message(c), prefix + "its epoch is -5" + suffix);
  c = sample();
  c.progress.correct = 41;
  EXPECT_EQ(message(c), prefix + "a correct count of 41 for 40 examples" + suffix);
  c = sample();
  c.progress.examples = 1000;
  c.progress.correct = 10;
  EXPECT_EQ(message(c), prefix + "1000 examples in 4 steps of 10" + suffix);
  c = sample();
  c.split = {12, -2};
  EXPECT_EQ(message(c), prefix + "the split gives a device -2 images" + suffix);
  c = sample();
  c.progress.steps = 11;
  EXPECT_EQ(message(c), prefix + "step 11 of an epoch of 10" + suffix);
  c = sample();
  c.history.pop_back();
  EXPECT_EQ(message(c), prefix + "figures of 1 finished epochs at epoch 3" + suffix);
  c = sample();
  c.history[0].test_accuracy = 1.5;
  EXPECT_EQ(message(c), prefix + "an accuracy of 1.5 in epoch 1" + suffix);
  c = sample();
  c.replans[0].rows = {7, 4};
  EXPECT_EQ(message(c), prefix +
                            "a re-plan of the split after step 7 of epoch 1 that no run of 2 "
                            "devices and batch 10 could make" +
                            suffix);
}

// A table that does not add up behind a valid checksum (a broken writer) is still an
// error, never a crash or a wrong tensor.
TEST(CheckpointFormat, MalformedTableBehindAValidChecksum) {
  Checkpoint c = sample();
  c.tensors[0].bytes.pop_back();  // 23 bytes for f32[2,3]
  EXPECT_EQ(
      runtime::decodeCheckpoint(runtime::encodeCheckpoint(c), "d/checkpoint").status().message(),
      "'d/checkpoint' is malformed: tensor @w of f32[2,3] has 23 bytes, not 24");
}

// A write killed after half of the temporary file leaves the last checkpoint whole; the
// next write goes over the leftover temporary file.
TEST(CheckpointFormat, WriteKilledHalfwayLeavesTheLastCheckpoint) {
  // Forked, not re-executed: the child must write into this test's directory.
  GTEST_FLAG_SET(death_test_style, "fast");
  ScratchDir dir;
  const Checkpoint first = sample();
  ASSERT_TRUE(runtime::writeCheckpointFile(dir.path(), first).ok());
  Checkpoint second = advanceTo(sample(), 7);
  second.tensors[0].bytes = bytesOf({9, 9, 9, 9, 9, 9});
  EXPECT_EXIT(
      {
        (void)runtime::writeCheckpointFile(dir.path(), second, [] { raise(SIGKILL); });
        _exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "");
  const std::vector<std::string> temps = runtime::checkpointTempFiles(dir.path());
  ASSERT_EQ(temps.size(), 1u);
  EXPECT_EQ(std::filesystem::file_size(temps[0]), runtime::encodeCheckpoint(second).size() / 2);
  auto kept = runtime::readCheckpointFile(dir.path());
  ASSERT_TRUE(kept.ok()) << kept.status();
  expectSame(first, *kept);
  ASSERT_TRUE(runtime::writeCheckpointFile(dir.path(), second).ok());
  expectSame(second, *runtime::readCheckpointFile(dir.path()));
  // The killed write's file is left (its own name: nothing renames it into place) until
  // a writer that holds the directory's lock clears it.
  EXPECT_TRUE(std::filesystem::exists(temps[0]));
  runtime::CheckpointWriter writer(dir.path(), /*writes=*/true);
  ASSERT_TRUE(writer.prepare(/*replacing=*/true).ok());
  EXPECT_TRUE(runtime::checkpointTempFiles(dir.path()).empty());
}

TEST(CheckpointWriter, RefusesAnotherRunsCheckpointAndDoesNothingOffRankZero) {
  ScratchDir dir;
  const std::string sub = dir.path() + "/run";
  runtime::CheckpointWriter writer(sub, /*writes=*/true,
                                   {.setting = "--checkpoint", .resume = "--resume"});
  ASSERT_TRUE(writer.prepare(false).ok());  // creates the directory
  ASSERT_TRUE(runtime::writeCheckpointFile(sub, sample()).ok());
  EXPECT_EQ(writer.prepare(false).message(),
            absl::StrCat("--checkpoint: '", sub,
                         "/checkpoint' exists already; continue that run "
                         "with --resume ",
                         sub, ", or write to another directory"));
  EXPECT_TRUE(writer.prepare(true).ok());
  EXPECT_EQ(runtime::CheckpointWriter(dir.path() + "/no/such", true).prepare(false).message(),
            absl::StrCat("checkpoint: cannot create directory '", dir.path(),
                         "/no/such': No such file or directory"));
  // Not the writing rank: no directory made, nothing written.
  runtime::CheckpointWriter other(dir.path() + "/other", /*writes=*/false);
  EXPECT_TRUE(other.prepare(false).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/other"));
}

TEST(CheckpointCompatibility, ModelAndSettingsMustMatch) {
  const Checkpoint c = sample();
  EXPECT_TRUE(runtime::checkCompatible(c, "lenet",
                                       {{"--batch", "10"}, {"--seed", "3"}, {"--lr", "0.1"}}, "p")
                  .ok());
  // A setting listed only when given (--label-smoothing, --clip-grad-norm) that the run
  // leaves out.
  EXPECT_EQ(
      runtime::checkCompatible(c, "lenet", {{"--batch", "10"}, {"--seed", "3"}}, "p").message(),
      "'p' was written with --lr 0.1; this run has no --lr (resume with the value it was "
      "written with)");
  EXPECT_EQ(runtime::checkCompatible(c, "resnet18", {}, "p").message(),
            "'p' is a checkpoint of lenet, not of resnet18 (model)");
  EXPECT_EQ(runtime::checkCompatible(c, "lenet",
                                     {{"--batch", "20"}, {"--seed", "3"}, {"--lr", "0.1"}}, "p")
                .message(),
            "'p' was written with --batch 10; this run has --batch 20 (resume with the value it "
            "was written with)");
  EXPECT_EQ(runtime::checkCompatible(
                c, "lenet",
                {{"--batch", "10"}, {"--seed", "3"}, {"--lr", "0.1"}, {"--sync-bn", "on"}}, "p")
                .message(),
            "'p' was written with --sync-bn (none); this run has --sync-bn on (resume with the "
            "value it was written with)");
  // Issue 40: every setting that differs, both ways, with where a value comes from.
  EXPECT_EQ(
      runtime::checkCompatible(c, "lenet", {{"--batch", "20"}, {"--warmup", "2"}}, "p",
                               {.values = {{"--warmup", "lenet's own for a run of 2 epochs"}}})
          .message(),
      "'p' was written with --batch 10, --warmup (none), --seed 3, --lr 0.1; this run has "
      "--batch 20, --warmup 2 (lenet's own for a run of 2 epochs), no --seed, no --lr "
      "(resume with the values it was written with)");
  EXPECT_EQ(runtime::checkCompatible(c, "cnn", {}, "p", {.model_setting = "--onnx"}).message(),
            "'p' is a checkpoint of lenet, not of cnn (--onnx)");
}

TrainSetup lenetSetup(int devices) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.batch = 24;
  o.momentum = 0.9;  // optimizer state that matters
  o.weight_decay = 1e-4;
  return o;
}

// Variables come back bit for bit on every device, and the optimizer state with them: the
// next step of the restored trainer equals the original's.
TEST(CheckpointVariables, RestoredTrainerStepsLikeTheOriginal) {
  auto batches = randomBatches(4, 24, 11);
  auto original = trainOn("lenet", lenetSetup(2), {batches[0], batches[1], batches[2]});
  ASSERT_TRUE(original);
  auto tensors = runtime::captureVariables(original->executor());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  Checkpoint c = startOfRun(2);
  c.tensors = *tensors;
  for (const CheckpointTensor& t : c.tensors) EXPECT_EQ(t.replica, 0u) << t.name;  // no BN
  auto decoded = runtime::decodeCheckpoint(runtime::encodeCheckpoint(c), "p");
  ASSERT_TRUE(decoded.ok());

  TrainSetup other_seed = lenetSetup(2);
  other_seed.seed = 99;
  auto restored = trainOn("lenet", other_seed, {});
  ASSERT_TRUE(restored);
  ASSERT_TRUE(runtime::restoreVariables(*decoded, restored->executor(), "p").ok());
  EXPECT_TRUE(sameBits(snapshot(*restored), snapshot(*original)));
  ASSERT_TRUE(original->trainStep(batches[3].view()).ok());
  ASSERT_TRUE(restored->trainStep(batches[3].view()).ok());
  EXPECT_TRUE(sameBits(snapshot(*restored), snapshot(*original)));
}

TEST(CheckpointVariables, AnotherModelOrShapeIsRefused) {
  auto lenet = trainOn("lenet", lenetSetup(1), {});
  ASSERT_TRUE(lenet);
  Checkpoint c = startOfRun(1);
  c.tensors = *runtime::captureVariables(lenet->executor());
  ASSERT_FALSE(c.tensors.empty());

  Checkpoint reshaped = c;
  CheckpointTensor& t = reshaped.tensors[0];
  const std::string name = t.name, was = ir::toString(t.type);
  t.type.shape.push_back(1);  // same bytes, another shape
  EXPECT_EQ(runtime::restoreVariables(reshaped, lenet->executor(), "p").message(),
            absl::StrCat("'p' has variable @", name, " as ", ir::toString(t.type),
                         ", but lenet has it as ", was));
  Checkpoint missing = c;
  missing.tensors.erase(missing.tensors.begin());
  EXPECT_EQ(runtime::restoreVariables(missing, lenet->executor(), "p").message(),
            absl::StrCat("'p' has no value for variable @", name, " of lenet"));
  Checkpoint extra = c;
  extra.tensors.push_back({"stage9.weight", 0, f32({1}), bytesOf({1})});
  EXPECT_EQ(runtime::restoreVariables(extra, lenet->executor(), "p").message(),
            "'p' has variable @stage9.weight, which lenet does not (a checkpoint of another "
            "model?)");
}

// Without sync batch norm each device's running statistics come from its own share of the
// batch: those replicas are stored apart and come back per device; on another device
// count every device starts from the first device's. Also the size and write time of a
// ResNet-18 checkpoint (docs/DESIGN.md).
TEST(CheckpointVariables, BatchNormReplicasThatDifferAreKeptPerDevice) {
  TrainSetup o;
  o.devices = cpus(2);
  o.batch = 8;
  o.momentum = 0.9;
  auto batches = randomBatches(1, 8, 5);
  auto resnet = trainOn("resnet18", o, batches);
  ASSERT_TRUE(resnet);
  auto start = std::chrono::steady_clock::now();
  auto tensors = runtime::captureVariables(resnet->executor());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  Checkpoint c = startOfRun(2);
  c.model = "resnet18";
  c.tensors = *tensors;
  ScratchDir dir;
  ASSERT_TRUE(runtime::writeCheckpointFile(dir.path(), c).ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto bytes = std::filesystem::file_size(runtime::checkpointPath(dir.path()));
  std::printf("resnet18 (momentum): checkpoint of %.1f MB captured and written in %.3f s\n",
              bytes / 1e6, seconds);
  size_t per_device = 0;
  for (const CheckpointTensor& t : c.tensors) {
    if (t.replica == 0) continue;
    ++per_device;
    EXPECT_NE(t.name.find("running"), std::string::npos) << t.name;
  }
  EXPECT_GT(per_device, 0u);

  auto back = runtime::readCheckpointFile(dir.path());
  ASSERT_TRUE(back.ok()) << back.status();
  auto same = trainOn("resnet18", o, {});
  ASSERT_TRUE(same);
  ASSERT_TRUE(runtime::restoreVariables(*back, same->executor(), "p").ok());
  EXPECT_TRUE(sameBits(snapshot(*same), snapshot(*resnet)));

  TrainSetup three = o;
  three.devices = cpus(3);
  three.batch = 9;
  auto resplit = trainOn("resnet18", three, {});
  ASSERT_TRUE(resplit);
  ASSERT_TRUE(runtime::restoreVariables(*back, resplit->executor(), "p").ok());
  const Snapshot original = snapshot(*resnet);
  for (const auto& [name, replicas] : snapshot(*resplit))
    for (size_t d = 0; d < 3; ++d) EXPECT_EQ(replicas[d], original.at(name)[0]) << name << d;
}

TEST(CheckpointVariables, LenetSizeAndWriteTime) {
  auto lenet = trainOn("lenet", lenetSetup(2), randomBatches(1, 24, 1));
  ASSERT_TRUE(lenet);
  ScratchDir dir;
  runtime::CheckpointWriter writer(dir.path(), true);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(writer.save(lenet->executor(), {.model = "lenet", .devices = 2}).ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto bytes = std::filesystem::file_size(runtime::checkpointPath(dir.path()));
  std::printf("lenet (momentum): checkpoint of %.1f kB captured and written in %.4f s\n",
              bytes / 1e3, seconds);
  int64_t values = 0;
  for (const ir::Var& v : lenet->executor().module().vars()) values += v.type.bytes();
  EXPECT_GT(static_cast<int64_t>(bytes), values);  // every variable once, plus the tables
  EXPECT_LT(static_cast<int64_t>(bytes), values + 4096);
}

// A data set of `count` distinct 28x28 images with labels 0..9 in turn.
runtime::data::Dataset syntheticData(int64_t count) {
  runtime::data::Dataset d;
  d.count = d.available = count;
  d.rows = d.cols = 28;
  d.images.resize(static_cast<size_t>(count * 28 * 28));
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = static_cast<float>(i * 7 % 256) / 255;
  for (int64_t i = 0; i < count; ++i) d.labels.push_back(static_cast<int32_t>(i % 10));
  return d;
}

TEST(CheckpointDataOrder, StartingAnEpochAtABatchSkipsExactlyThoseBatches) {
  const runtime::data::Dataset data = syntheticData(100);
  runtime::data::BatchLoader whole(data, 10, true, 4, true), skipped(data, 10, true, 4, true);
  whole.startEpoch(3);
  skipped.startEpoch(3, 6);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(whole.next());
  for (int i = 6; i < 10; ++i) {
    auto a = whole.next(), b = skipped.next();
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->index, b->index);
    EXPECT_EQ(std::memcmp(a->fields[1], b->fields[1], 10 * sizeof(int32_t)), 0);
    EXPECT_EQ(std::memcmp(a->fields[0], b->fields[0], 10 * 28 * 28 * sizeof(float)), 0);
  }
  EXPECT_FALSE(whole.next());
  EXPECT_FALSE(skipped.next());
  skipped.startEpoch(4, 10);  // at the end already
  EXPECT_FALSE(skipped.next());
}

// Two epochs straight, against one and a half epochs, a checkpoint through the file
// format, and a fresh trainer that restores it and finishes: the same epoch figures and
// parameters, bit for bit.
void expectResumedMidwayEndsWithTheSameBits(TrainSetup o) {
  const runtime::data::Dataset data = syntheticData(120);
  auto spec = zoo::modelByName("lenet");
  ASSERT_TRUE(spec.ok());

  auto straight = makeTrainer(*spec, o);
  ASSERT_TRUE(straight.ok());
  ASSERT_TRUE((*straight)->initialize().ok());
  runtime::data::BatchLoader loader(data, o.batch, true, 7, true);
  runtime::PassResult straight_epoch2;
  for (int epoch = 1; epoch <= 2; ++epoch) {
    loader.startEpoch(epoch);
    auto r = (*straight)->trainEpoch(loader);
    ASSERT_TRUE(r.ok());
    straight_epoch2 = *r;
  }

  auto first = makeTrainer(*spec, o);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->initialize().ok());
  loader.startEpoch(1);
  ASSERT_TRUE((*first)->trainEpoch(loader).ok());
  loader.startEpoch(2);
  runtime::EpochProgress at;
  auto part = (*first)->trainEpoch(loader, [&](const runtime::StepReport& s) {
    at = {s.step, s.examples, s.correct, s.loss_sum, s.seconds};
    return s.step < 4;
  });
  ASSERT_TRUE(part.ok());
  ASSERT_TRUE(part->stopped);
  ScratchDir dir;
  Checkpoint c{.model = "lenet",
               .epoch = 2,
               .progress = at,
               .steps_per_epoch = 6,
               .devices = 2,
               .split = {o.batch / 2, o.batch - o.batch / 2},
               .history = {{.epoch = 1}}};
  ASSERT_TRUE(runtime::CheckpointWriter(dir.path(), true).save((*first)->executor(), c).ok());
  first->reset();  // the first run is gone

  TrainSetup fresh_seed = o;
  fresh_seed.seed = 5;
  auto second = makeTrainer(*spec, fresh_seed);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->initialize().ok());
  auto back = runtime::readCheckpointFile(dir.path());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(runtime::restoreVariables(*back, (*second)->executor(), "p").ok());
  runtime::data::BatchLoader resumed_loader(data, o.batch, true, 7, true);
  resumed_loader.startEpoch(back->epoch, back->progress.steps);
  auto rest = (*second)->trainEpoch(resumed_loader, back->progress);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->steps, straight_epoch2.steps);
  EXPECT_EQ(rest->examples, straight_epoch2.examples);
  expectSameBits(rest->loss, straight_epoch2.loss);
  expectSameBits(rest->accuracy, straight_epoch2.accuracy);
  EXPECT_TRUE(sameBits(snapshot(**second), snapshot(**straight)));
}

TEST(CheckpointResume, AnEpochResumedMidwayEndsWithTheSameBits) {
  TrainSetup o = lenetSetup(2);
  o.batch = 20;
  expectResumedMidwayEndsWithTheSameBits(o);
}

// AdamW's moments and per-parameter step counts (which the bias correction reads) are
// variables like the weights: the resumed run steps as the uninterrupted one, bit for bit.
TEST(CheckpointResume, AdamwResumedMidwayEndsWithTheSameBits) {
  TrainSetup o = lenetSetup(2);
  o.batch = 20;
  o.optimizer = "adamw";
  o.lr = 2e-3;
  o.weight_decay = 0.05;
  o.beta2 = 0.99;
  expectResumedMidwayEndsWithTheSameBits(o);
}

}  // namespace
}  // namespace tandem::testing
