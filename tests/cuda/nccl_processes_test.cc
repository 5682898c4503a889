// NCCL across processes, as far as a machine without a GPU goes: the unique id is made by
// rank 0 (ncclGetUniqueId needs no GPU) and reaches every rank of an mpirun job over MPI
// byte for byte; the group's checks refuse what NCCL cannot join. The communicators
// themselves (ncclCommInitRank in one NCCL group per process) need GPUs: docs/GPU.md.
//
// The mpirun test runs this test program itself as the two ranks: the child test does
// the exchange only when TANDEM_NCCL_ID_CHILD is set (mpirun -x), and prints what it got.

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backend/cuda/cuda_communicator.h"
#include "backend/processes.h"
#include "gtest/gtest.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

constexpr char kChildEnv[] = "TANDEM_NCCL_ID_CHILD";

std::string mpirunPath() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':')) {
    const std::string candidate = absl::StrCat(dir, "/mpirun");
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string selfPath() {
  std::array<char, 4096> buffer{};
  const ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  return n > 0 ? std::string(buffer.data(), static_cast<size_t>(n)) : "";
}

// One rank of the mpirun job below: shares a unique id and prints "rank R of P: HEX".
TEST(NcclAcrossProcesses, ChildRank) {
  if (std::getenv(kChildEnv) == nullptr)
    GTEST_SKIP() << "runs only as a rank of UniqueIdReachesEveryRankOverMpi's mpirun job";
  absl::StatusOr<backend::Processes*> procs = backend::Processes::start();
  ASSERT_TRUE(procs.ok()) << procs.status();
  ASSERT_TRUE((*procs)->several()) << "not started by mpirun";
  auto world = (*procs)->communicator({0, 1});
  ASSERT_TRUE(world.ok()) << world.status();
  absl::StatusOr<ncclUniqueId> id = backend::cuda::shareUniqueId(**world, "the test group");
  ASSERT_TRUE(id.ok()) << id.status();
  std::string hex;
  for (char c : id->internal) absl::StrAppendFormat(&hex, "%02x", static_cast<unsigned char>(c));
  std::printf("rank %d of %d: %s\n", (*procs)->rank(), (*procs)->size(), hex.c_str());
  std::fflush(stdout);
  world->reset();
  backend::Processes::finish();
}

TEST(NcclAcrossProcesses, UniqueIdReachesEveryRankOverMpi) {
  if (std::getenv(kChildEnv) != nullptr) GTEST_SKIP() << "a rank of the job does not start one";
  const std::string mpirun = mpirunPath();
  if (mpirun.empty())
    GTEST_SKIP() << "mpirun is missing (scripts/setup installs openmpi-bin): the unique id's "
                    "trip over MPI is not tested here";
  const std::string command = absl::StrCat(
      mpirun, " --allow-run-as-root --oversubscribe -np 2 -x ", kChildEnv, "=1 ", selfPath(),
      " --gtest_filter=NcclAcrossProcesses.ChildRank 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  std::string out;
  std::array<char, 4096> chunk{};
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe)) out.append(chunk.data(), n);
  const int status = ::pclose(pipe);
  ASSERT_EQ(status, 0) << out;
  std::map<int, std::string> ids;  // rank -> the id as it printed it
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(": ", 1));
    int rank = 0;
    if (parts.size() == 2 && absl::StartsWith(parts[0], "rank ") &&
        absl::EndsWith(parts[0], " of 2") &&
        absl::SimpleAtoi(parts[0].substr(5, parts[0].size() - 10), &rank))
      ids[rank] = parts[1];
  }
  ASSERT_EQ(ids.size(), 2u) << out;
  EXPECT_EQ(ids[0], ids[1]) << out;
  EXPECT_EQ(ids[0].size(), 2 * sizeof(ncclUniqueId::internal)) << out;
  EXPECT_NE(ids[0], std::string(ids[0].size(), '0')) << "the id is all zeros: nobody made it";
}

// What NCCL cannot join is refused before any NCCL call, naming the device.
TEST(NcclAcrossProcesses, GroupsOfOtherKindsAreRefused) {
  const std::vector<ir::Device> members = {{::tandem::testing::kind("cuda"), 0, 0},
                                           {::tandem::testing::kind("cpu"), 0, 1}};
  absl::StatusOr<std::unique_ptr<backend::CommunicatorGroup>> g =
      backend::cuda::makeProcessCommunicators({}, members, nullptr);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(absl::StrContains(g.status().message(),
                                "cpu:0@1 is not a CUDA device: NCCL joins CUDA devices only"))
      << g.status();
}

}  // namespace
}  // namespace tandem::testing
