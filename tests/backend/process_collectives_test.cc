// reduce_scatter and all_gather across processes (the CPU process communicator over MPI):
// under `mpirun -np 2`, for groups whose devices sit on the two processes in several
// ways (one each; two and one; interleaved 0,1,0,1,1), every shard is the same bits as the
// one-process local communicator's (the all_reduce's slice), and every all_gather the
// concatenation.
//
// The mpirun test runs this test program itself as the two ranks: the child test does the
// collectives only when TANDEM_PROCESS_COLLECTIVES_CHILD is set (mpirun -x).

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/bf16.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/cpu/local_communicator.h"
#include "backend/cpu/process_communicator.h"
#include "backend/processes.h"
#include "backend/shards.h"
#include "gtest/gtest.h"
#include "runtime/host_tensor.h"
#include "tests/test_util.h"

namespace tandem::backend::cpu {
namespace {

using runtime::HostTensor;

constexpr char kChildEnv[] = "TANDEM_PROCESS_COLLECTIVES_CHILD";

// Position p's buffer: values whose sums depend on the order of addition.
HostTensor buffer(int p, ir::DType dtype, int64_t n) {
  std::mt19937 rng(100 + p);
  std::uniform_real_distribution<float> mantissa(-1, 1), exponent(-4, 4);
  HostTensor t(ir::TensorType{dtype, {n}});
  for (int64_t i = 0; i < n; ++i) {
    const float v = mantissa(rng) * std::pow(10.f, exponent(rng));
    if (dtype == ir::DType::kBF16)
      static_cast<bf16*>(t.view().data)[i] = bf16(v);
    else
      static_cast<float*>(t.view().data)[i] = v;
  }
  return t;
}

std::vector<int64_t> balanced(int64_t n, int ranks) {
  std::vector<int64_t> sizes;
  for (int r = 0; r < ranks; ++r) sizes.push_back(n / ranks + (r < n % ranks ? 1 : 0));
  return sizes;
}

struct Streams {
  explicit Streams(size_t n) {
    for (size_t i = 0; i < n; ++i)
      all.push_back(std::make_unique<CpuStream>(absl::StrCat("comm", i), 1));
  }
  void synchronize() {
    for (auto& s : all) EXPECT_TRUE(s->synchronize().ok());
  }
  std::vector<std::unique_ptr<CpuStream>> all;
};

// Every position's shard and the gathered buffer, by the one-process local communicator.
void reference(int positions, ir::DType dtype, int64_t n, const std::vector<int64_t>& sizes,
               std::vector<HostTensor>& shards, std::vector<HostTensor>& gathered) {
  std::unique_ptr<CommunicatorGroup> group = makeLocalCommunicators(positions);
  Streams streams(static_cast<size_t>(positions));
  std::vector<HostTensor> in;
  for (int p = 0; p < positions; ++p) {
    in.push_back(buffer(p, dtype, n));
    shards.emplace_back(ir::TensorType{dtype, {sizes[p]}});
    gathered.emplace_back(ir::TensorType{dtype, {n}});
  }
  for (int p = 0; p < positions; ++p)
    ASSERT_TRUE(
        group->rank(p)
            .reduceScatter(in[p].view(), shards[p].view(), sizes, ReduceOp::kSum, *streams.all[p])
            .ok());
  for (int p = 0; p < positions; ++p)
    ASSERT_TRUE(group->rank(p)
                    .allGather(shards[p].view(), gathered[p].view(), sizes, *streams.all[p])
                    .ok());
  streams.synchronize();
}

// One rank of the mpirun job below: runs the collectives over MPI and compares each of
// its devices' results with the one-process reference; prints "rank R: N checks".
TEST(ProcessCollectives, ChildRank) {
  if (std::getenv(kChildEnv) == nullptr)
    GTEST_SKIP() << "runs only as a rank of ShardsAcrossProcessesAreTheLocalBits' mpirun job";
  absl::StatusOr<Processes*> procs = Processes::start();
  ASSERT_TRUE(procs.ok()) << procs.status();
  ASSERT_TRUE((*procs)->several()) << "not started by mpirun";
  const int me = (*procs)->rank();
  int checks = 0;
  {
    auto world = (*procs)->communicator({0, 1});
    ASSERT_TRUE(world.ok()) << world.status();
    const std::vector<std::vector<int>> layouts = {{0, 1}, {0, 0, 1}, {0, 1, 0, 1, 1}};
    for (const std::vector<int>& owner : layouts)
      for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16}) {
        SCOPED_TRACE(
            absl::StrCat("owners ", absl::StrJoin(owner, ","), ", ", ir::dtypeName(dtype)));
        const int positions = static_cast<int>(owner.size());
        constexpr int64_t kN = 2503;  // uneven over 2, 3 and 5, and over a 1024 chunk
        const std::vector<int64_t> sizes = balanced(kN, positions);
        std::vector<HostTensor> want_shards, want_gathered;
        reference(positions, dtype, kN, sizes, want_shards, want_gathered);

        std::vector<int> local;
        std::vector<std::string> names;
        for (int p = 0; p < positions; ++p)
          if (owner[static_cast<size_t>(p)] == me) {
            local.push_back(p);
            names.push_back(absl::StrCat("cpu:", local.size() - 1, "@", me));
          }
        std::unique_ptr<CommunicatorGroup> group =
            makeProcessCommunicators(owner, local, names, *world);
        Streams streams(local.size());
        std::vector<HostTensor> in, shards, gathered;
        for (int p : local) {
          in.push_back(buffer(p, dtype, kN));
          shards.emplace_back(ir::TensorType{dtype, {sizes[static_cast<size_t>(p)]}});
          gathered.emplace_back(ir::TensorType{dtype, {kN}});
        }
        for (size_t i = 0; i < local.size(); ++i)
          ASSERT_TRUE(group->rank(static_cast<int>(i))
                          .reduceScatter(in[i].view(), shards[i].view(), sizes, ReduceOp::kSum,
                                         *streams.all[i])
                          .ok());
        for (size_t i = 0; i < local.size(); ++i)
          ASSERT_TRUE(group->rank(static_cast<int>(i))
                          .allGather(shards[i].view(), gathered[i].view(), sizes, *streams.all[i])
                          .ok());
        streams.synchronize();
        for (size_t i = 0; i < local.size(); ++i) {
          const size_t p = static_cast<size_t>(local[i]);
          ASSERT_EQ(std::memcmp(shards[i].view().data, want_shards[p].view().data,
                                static_cast<size_t>(shards[i].view().bytes())),
                    0)
              << "the shard of position " << p;
          ASSERT_EQ(std::memcmp(gathered[i].view().data, want_gathered[p].view().data,
                                static_cast<size_t>(gathered[i].view().bytes())),
                    0)
              << "the gathered buffer of position " << p;
          checks += 2;
        }
      }
  }
  std::printf("rank %d: %d checks\n", me, checks);
  std::fflush(stdout);
  Processes::finish();
}

TEST(ProcessCollectives, ShardsAcrossProcessesAreTheLocalBits) {
  if (std::getenv(kChildEnv) != nullptr) GTEST_SKIP() << "a rank of the job does not start one";
  TANDEM_NEED_INSTALLED(::tandem::testing::whyNoMpirun());
  std::array<char, 4096> self{};
  const ssize_t len = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  ASSERT_GT(len, 0);
  const std::string command =
      absl::StrCat("mpirun --allow-run-as-root --oversubscribe -np 2 -x ", kChildEnv, "=1 ",
                   std::string(self.data(), static_cast<size_t>(len)),
                   " --gtest_filter=ProcessCollectives.ChildRank 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  std::string out;
  std::array<char, 4096> chunk{};
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe)) out.append(chunk.data(), n);
  ASSERT_EQ(::pclose(pipe), 0) << out;
  // Rank 0 holds 1 + 2 + 2 positions of the three layouts, rank 1 1 + 1 + 3; two checks
  // each, for two dtypes.
  EXPECT_TRUE(absl::StrContains(out, "rank 0: 20 checks")) << out;
  EXPECT_TRUE(absl::StrContains(out, "rank 1: 20 checks")) << out;
}

}  // namespace
}  // namespace tandem::backend::cpu
