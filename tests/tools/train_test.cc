#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

// The CI bar: LeNet on 5,000 training images, two devices, a few epochs.
TEST(Train, LenetOnAFashionMnistSubsetLearns) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  auto r = runTandem({"train", "--model", "lenet", "--devices", "cpu:0,cpu:1", "--batch", "128",
                      "--epochs", "3", "--limit-train", "5000", "--limit-test", "2000", "--metrics",
                      dir.file("m.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("train_loss"), std::string::npos) << r.out;
  auto rows = readCsv(dir.file("m.csv"));
  ASSERT_EQ(rows.size(), 3u);
  for (const char* column :
       {"epoch", "train_loss", "train_acc", "test_acc", "seconds", "images_per_s"})
    EXPECT_TRUE(rows[0].contains(column)) << column;
  EXPECT_GE(std::stod(rows.back()["test_acc"]), 0.70) << r.out;
  EXPECT_LT(std::stod(rows.back()["train_loss"]), std::stod(rows.front()["train_loss"]));
  EXPECT_GT(std::stod(rows.back()["images_per_s"]), 0);
}

TEST(Train, ResNet18RunsAnEpochOnTwoDevices) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  auto r = runTandem({"train", "--model", "resnet18", "--devices", "cpu:0,cpu:1", "--batch", "64",
                      "--limit-train", "128", "--limit-test", "64", "--epochs", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("images/s"), std::string::npos) << r.out;
}

// --conv-algorithm direct trains too (no Winograd in any kernel).
TEST(Train, DirectConvolutionsTrain) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  auto r =
      runTandem({"train", "--model", "lenet", "--devices", "2", "--batch", "64", "--limit-train",
                 "256", "--limit-test", "64", "--epochs", "1", "--conv-algorithm", "direct"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("images/s"), std::string::npos) << r.out;
}

// --plain-layout keeps every tensor NCHW; the default nChw16c activations (on AVX-512)
// change where bytes sit, not one figure of the run.
TEST(Train, PlainLayoutPrintsTheSameFigures) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  auto figures = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", "--model", "resnet18", "--devices", "2", "--batch",
                                     "32", "--limit-train", "64", "--limit-test", "32",
                                     "--epochs", "1", "--seed", "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = runTandem(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // The epoch row up to the seconds: epoch, train loss, train accuracy, test accuracy.
    const size_t row = r.out.find("\n    1 ");
    EXPECT_NE(row, std::string::npos) << r.out;
    std::vector<std::string> cells = absl::StrSplit(r.out.substr(row + 1), ' ', absl::SkipEmpty());
    cells.resize(std::min<size_t>(cells.size(), 4));
    return cells;
  };
  std::vector<std::string> blocked = figures({}), plain = figures({"--plain-layout"});
  ASSERT_EQ(blocked.size(), 4u);
  EXPECT_EQ(blocked, plain);
}

// Mixed precision on a subset: LeNet in bf16 ends near the f32 run of the same seed (the
// full 10-epoch figure is in docs/PERF.md).
TEST(Train, LenetInBf16EndsNearF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  auto final_test_acc = [](const std::string& precision) {
    TempDir dir;
    auto r = runTandem({"train", "--model", "lenet", "--devices", "cpu:0,cpu:1", "--batch", "128",
                        "--epochs", "3", "--limit-train", "10000", "--limit-test", "5000",
                        "--seed", "5", "--precision", precision, "--metrics", dir.file("m.csv")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto rows = readCsv(dir.file("m.csv"));
    EXPECT_EQ(rows.size(), 3u);
    return rows.empty() ? 0.0 : std::stod(rows.back()["test_acc"]);
  };
  const double f32 = final_test_acc("f32"), bf16 = final_test_acc("bf16");
  EXPECT_GE(f32, 0.75);
  EXPECT_NEAR(bf16, f32, 0.015) << "f32 " << f32 << ", bf16 " << bf16;
}

TEST(TrainErrors, Bf16OnACpuWithoutBf16Instructions) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  // oneDNN's ISA cap stands in for an older CPU: the first bf16 kernel refuses to load.
  setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", 1);
  auto r = runTandem({"train", "--model", "lenet", "--devices", "2", "--precision", "bf16",
                      "--limit-train", "256", "--limit-test", "256"});
  unsetenv("ONEDNN_MAX_CPU_ISA");
  EXPECT_TRUE(isUsageError(r, {"%x.bf16.0 (cast @cpu:0)", "AVX512_BF16", "--precision f32"}));
}

TEST(TrainErrors, BatchSmallerThanTheDeviceCount) {
  EXPECT_TRUE(isUsageError(
      runTandem({"train", "--model", "lenet", "--devices", "cpu:0,cpu:1,cpu:2", "--batch", "2"}),
      {"--batch", "2", "device count 3"}));
}

TEST(TrainErrors, UnknownDevice) {
  EXPECT_TRUE(isUsageError(runTandem({"train", "--model", "lenet", "--devices", "tpu:0"}),
                           {"--devices", "tpu:0"}));
}

TEST(TrainErrors, CudaDeviceWithoutACudaRuntime) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  EXPECT_TRUE(isUsageError(runTandem({"train", "--model", "lenet", "--devices", "cuda:0",
                                      "--limit-train", "256", "--limit-test", "256"}),
                           {"cuda:0"}));
}

TEST(TrainErrors, MissingModelAndWrongModel) {
  EXPECT_TRUE(isUsageError(runTandem({"train"}), {"--model"}));
  EXPECT_TRUE(isUsageError(runTandem({"train", "--model", "vgg"}), {"--model", "vgg"}));
}

TEST(TrainErrors, BadInitializer) {
  EXPECT_TRUE(isUsageError(runTandem({"train", "--model", "lenet", "--init", "normal:-1"}),
                           {"--init", "normal:-1"}));
}

TEST(TrainErrors, MissingDataDirectory) {
  EXPECT_TRUE(
      isUsageError(runTandem({"train", "--model", "lenet", "--data", "/nonexistent/fmnist"}),
                   {"/nonexistent/fmnist"}));
}

TEST(TrainErrors, CorruptDataFileIsNamed) {
  TempDir dir;
  std::string bad(16, '\0');
  bad[2] = 0x08;
  bad[3] = 0x01;  // magic 0x00000801 (a labels file) where images (0x00000803) belong
  dir.write("train-images-idx3-ubyte", bad);
  dir.write("train-labels-idx1-ubyte", bad);
  std::string path = dir.file("");
  path.pop_back();
  auto r = runTandem({"train", "--model", "lenet", "--data", path});
  EXPECT_TRUE(isUsageError(r, {"train-images-idx3-ubyte", "magic"}));
}

TEST(TrainErrors, UnwritableMetricsFile) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  EXPECT_TRUE(isUsageError(runTandem({"train", "--model", "lenet", "--limit-train", "256",
                                      "--limit-test", "256", "--metrics", "/nonexistent/m.csv"}),
                           {"--metrics", "/nonexistent/m.csv"}));
}

}  // namespace
}  // namespace tandem::testing

namespace tandem::testing {
namespace {

// SIGINT (Ctrl-C) and SIGTERM (timeout, a batch scheduler) end training after the current
// step: exit 128 + signal, one line on standard error saying where it stopped, the profile
// still printed and the metrics file's header on disk. Not a kill by the signal.
void expectCleanStop(int sig, const std::string& name) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  std::string out = dir.file("out.txt"), err = dir.file("err.txt"), csv = dir.file("m.csv");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (std::freopen(out.c_str(), "w", stdout) == nullptr) _exit(126);
    if (std::freopen(err.c_str(), "w", stderr) == nullptr) _exit(126);
    execl(TANDEM_CLI_PATH, TANDEM_CLI_PATH, "train", "--model", "lenet", "--devices", "2",
          "--batch", "64", "--epochs", "100", "--limit-train", "6400", "--limit-test", "64",
          "--profile", "--metrics", csv.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the table header is printed (training has begun), then signal.
  for (int i = 0; i < 600 && readFile(out).find("images/s") == std::string::npos; ++i)
    usleep(50 * 1000);
  ASSERT_NE(readFile(out).find("images/s"), std::string::npos) << readFile(out);
  kill(pid, sig);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
  std::string stderr_text = readFile(err);
  EXPECT_EQ(stderr_text.rfind("tandem: stopped by " + name + " in epoch ", 0), 0u) << stderr_text;
  EXPECT_NE(stderr_text.find(" after step "), std::string::npos) << stderr_text;
  EXPECT_EQ(std::count(stderr_text.begin(), stderr_text.end(), '\n'), 1) << stderr_text;
  EXPECT_NE(readFile(out).find("profile of train_step"), std::string::npos) << readFile(out);
  EXPECT_EQ(readFile(csv).rfind("epoch,train_loss,", 0), 0u) << readFile(csv);
}

TEST(Train, CtrlCStopsCleanlyAfterTheCurrentStep) { expectCleanStop(SIGINT, "Ctrl-C (SIGINT)"); }
TEST(Train, SigtermStopsCleanlyAfterTheCurrentStep) { expectCleanStop(SIGTERM, "SIGTERM"); }

}  // namespace
}  // namespace tandem::testing
