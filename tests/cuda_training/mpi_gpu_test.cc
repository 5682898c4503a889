// NCCL across processes on real GPUs: `mpirun -np 2 tandem train --devices cuda:0` with
// each rank shown one GPU (CUDA_VISIBLE_DEVICES per rank, the usual mpirun practice)
// against one process driving both GPUs. Needs two GPUs and mpirun; skips otherwise.

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/cuda/cuda_device.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

std::string mpirunPath() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':')) {
    const std::string candidate = absl::StrCat(dir, "/mpirun");
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The numbers of every epoch row (train_loss, train_acc, test_acc).
std::vector<double> epochFigures(const std::string& out) {
  std::vector<double> figures;
  bool table = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, "train_loss")) {
      table = true;
      continue;
    }
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double v = 0;
    if (table && cells.size() >= 4)
      for (size_t i = 1; i < 4; ++i)
        if (absl::SimpleAtod(cells[i], &v)) figures.push_back(v);
  }
  return figures;
}

TEST(CudaProcesses, TwoProcessesOfOneGpuEqualOneProcessOfTwo) {
  absl::StatusOr<int> gpus = backend::cuda::gpuCount();
  if (!gpus.ok() || *gpus < 2)
    GTEST_SKIP() << "needs two GPUs: "
                 << (gpus.ok() ? absl::StrCat(*gpus, " here") : std::string(gpus.status().message()));
  const std::string mpirun = mpirunPath();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is missing: NCCL across processes is not tested";
  const std::vector<std::string> train = {"train",      "--model", "lenet", "--batch", "256",
                                          "--epochs",   "1",       "--seed", "3",     "--limit-train",
                                          "2560",       "--limit-test", "512", "--no-tf32"};
  std::vector<std::string> one = train;
  one.insert(one.end(), {"--devices", "cuda:0,cuda:1"});
  const CommandResult a = runTandem(one);
  std::vector<std::string> args = {"--allow-run-as-root", "--oversubscribe"};
  for (int rank = 0; rank < 2; ++rank) {
    if (rank > 0) args.push_back(":");
    args.insert(args.end(), {"-np", "1", "-x", absl::StrCat("CUDA_VISIBLE_DEVICES=", rank),
                             TANDEM_CLI_PATH});
    args.insert(args.end(), train.begin(), train.end());
    args.insert(args.end(), {"--devices", "cuda:0"});
  }
  const CommandResult b = runProgram(mpirun, args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::vector<double> fa = epochFigures(a.out), fb = epochFigures(b.out);
  ASSERT_EQ(fa.size(), 3u) << a.out;
  ASSERT_EQ(fb.size(), fa.size()) << b.out;
  // NCCL may pick other channels for two processes than for one: close, not the same bits.
  for (size_t i = 0; i < fa.size(); ++i) EXPECT_NEAR(fb[i], fa[i], 2e-3) << a.out << b.out;
}

// A rank that stops (SIGSTOP after its second step, at the next step's first kernel: the
// CLI built with test hooks) leaves the other waiting on its GPU in an NCCL all_reduce,
// where no host call blocks: the NCCL watchdog sees the collective started and not ended,
// aborts the communicator when --collective-timeout has passed, and rank 0 stops every
// rank with the line naming the collective and its device (exit 4), as a CPU run does.
TEST(CudaProcesses, AStalledRankStopsEveryRankWithinTheTimeout) {
  absl::StatusOr<int> gpus = backend::cuda::gpuCount();
  if (!gpus.ok() || *gpus < 2)
    GTEST_SKIP() << "needs two GPUs: "
                 << (gpus.ok() ? absl::StrCat(*gpus, " here")
                               : std::string(gpus.status().message()));
  const std::string mpirun = mpirunPath();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is missing: NCCL across processes is not tested";
  constexpr int kTimeout = 5;
  const std::vector<std::string> train = {"train",
                                          "--model",
                                          "lenet",
                                          "--batch",
                                          "256",
                                          "--epochs",
                                          "1",
                                          "--limit-train",
                                          "16384",
                                          "--limit-test",
                                          "512",
                                          "--devices",
                                          "cuda:0",
                                          "--collective-timeout",
                                          absl::StrCat(kTimeout)};
  std::vector<std::string> args = {"--allow-run-as-root", "--oversubscribe"};
  for (int rank = 0; rank < 2; ++rank) {
    if (rank > 0) args.push_back(":");
    args.insert(args.end(), {"-np", "1", "-x", absl::StrCat("CUDA_VISIBLE_DEVICES=", rank)});
    if (rank == 1)
      args.insert(args.end(), {"-x", absl::StrCat("TANDEM_TEST_SIGNAL_AFTER=1:2:", SIGSTOP)});
    args.push_back(hookedCliPath());
    args.insert(args.end(), train.begin(), train.end());
  }
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = runProgram(mpirun, args);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_LT(seconds, kTimeout + 60) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("tandem: rank 0: waited "))) << r.err;
  EXPECT_TRUE(absl::StrContains(
      r.err, absl::StrCat("(--collective-timeout ", kTimeout, ") in all_reduce %")))
      << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, " on cuda:0: a rank died or stalls; stopping every rank"))
      << r.err;
}

}  // namespace
}  // namespace tandem::testing
