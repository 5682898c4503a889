// CUDA collectives. Without a GPU: the same-GPU communicator's reduction order and
// per-element math (the code its kernel runs) against the CPU local communicator, bit for
// bit; its group validation. With a GPU: logical devices sharing cuda:0 reduce and
// broadcast exactly as the host math says; NCCL with one rank, and across GPUs when the
// machine has two.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/cpu/local_communicator.h"
#include "backend/cuda/communicator_math.h"
#include "backend/cuda/communicator_plan.h"
#include "backend/cuda/cuda_communicator.h"
#include "backend/shards.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

using backend::ReduceOp;
using backend::TensorView;
using backend::cuda::ReduceKind;
using backend::cuda::TreePlan;

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax};

ReduceKind kindOf(ReduceOp op) {
  return op == ReduceOp::kMax    ? ReduceKind::kMax
         : op == ReduceOp::kMean ? ReduceKind::kMean
                                 : ReduceKind::kSum;
}

TreePlan planOf(int ranks) {
  absl::StatusOr<TreePlan> p = backend::cuda::treePlan(ranks);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : TreePlan{};
}

/// Values whose sum depends on the order they are added in: magnitudes from 1e-8 to 1e8,
/// both signs.
std::vector<double> orderSensitive(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = mantissa(rng) * std::pow(10.0, exponent(rng));
  return v;
}

TEST(CudaCommunicatorPlan, IsTheCpuLocalCommunicatorsTreeBitForBit) {
  std::mt19937 rng(1);
  int order_mattered = 0;
  for (int n = 1; n <= backend::cuda::kMaxSharedRanks; ++n) {
    const TreePlan plan = planOf(n);
    for (int trial = 0; trial < 50; ++trial) {
      const std::vector<double> v = orderSensitive(rng, n);
      for (ReduceOp op : kOps) {
        std::vector<double> scratch = v;
        const double gpu = backend::cuda::reduceByPlan(plan, kindOf(op), scratch.data());
        const double cpu = backend::cpu::treeReduce(v, op);
        EXPECT_EQ(std::memcmp(&gpu, &cpu, sizeof gpu), 0)
            << n << " ranks, trial " << trial << ": " << gpu << " vs " << cpu;
      }
      // The values tell orders apart: summing in rank order often differs from the tree.
      double in_order = 0;
      for (double x : v) in_order += x;
      if (in_order != backend::cpu::treeReduce(v, ReduceOp::kSum)) ++order_mattered;
    }
  }
  EXPECT_GT(order_mattered, 100);
}

TEST(CudaCommunicatorPlan, RefusesGroupsItCannotCarry) {
  EXPECT_FALSE(backend::cuda::treePlan(0).ok());
  absl::StatusOr<TreePlan> big = backend::cuda::treePlan(backend::cuda::kMaxSharedRanks + 1);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("between 1 and 32"), std::string::npos) << big.status();
}

/// Per rank, one tensor of `type` with random values (bf16: rounded from f32).
std::vector<Buffer> randomRanks(std::mt19937& rng, int n, const ir::TensorType& type) {
  std::vector<Buffer> out;
  std::uniform_real_distribution<float> d(-100, 100);
  for (int r = 0; r < n; ++r) {
    out.emplace_back(type);
    Buffer& b = out.back();
    for (int64_t i = 0; i < b.size(); ++i) {
      const float v = d(rng);
      if (type.dtype == ir::DType::kBF16)
        b.bf16()[i] = v;
      else
        b.f32()[i] = v;
    }
  }
  return out;
}

/// What every rank receives, by the host-compiled per-element math of the GPU kernel.
template <typename T>
std::vector<Buffer> hostAllReduce(std::vector<Buffer>& in, ReduceOp op) {
  const int n = static_cast<int>(in.size());
  const TreePlan plan = planOf(n);
  std::vector<Buffer> out;
  std::vector<const T*> srcs;
  std::vector<T*> dsts;
  for (int r = 0; r < n; ++r) out.emplace_back(in[static_cast<size_t>(r)].type());
  for (int r = 0; r < n; ++r) {
    srcs.push_back(static_cast<const T*>(in[static_cast<size_t>(r)].view().data));
    dsts.push_back(static_cast<T*>(out[static_cast<size_t>(r)].view().data));
  }
  for (int64_t i = 0; i < in[0].size(); ++i)
    backend::cuda::allReduceElement<T>(plan, kindOf(op), srcs.data(), dsts.data(), i);
  return out;
}

std::vector<Buffer> hostAllReduce(std::vector<Buffer>& in, ReduceOp op) {
  return in[0].type().dtype == ir::DType::kBF16 ? hostAllReduce<uint16_t>(in, op)
                                                : hostAllReduce<float>(in, op);
}

bool sameBytes(Buffer& a, Buffer& b) {
  return a.type() == b.type() &&
         std::memcmp(a.view().data, b.view().data, static_cast<size_t>(a.type().bytes())) == 0;
}

TEST(CudaCommunicatorMath, ElementsReduceAsTheCpuLocalCommunicator) {
  std::mt19937 rng(2);
  for (int n : {2, 3, 5, 6}) {
    for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16}) {
      for (ReduceOp op : kOps) {
        const ir::TensorType type{dtype, {1037}};
        std::vector<Buffer> in = randomRanks(rng, n, type);
        std::vector<Buffer> cpu_out;
        for (int r = 0; r < n; ++r) cpu_out.emplace_back(type);
        auto group = backend::cpu::makeLocalCommunicators(n);
        std::vector<std::unique_ptr<backend::cpu::CpuStream>> streams;
        std::vector<std::vector<TensorView>> ins(static_cast<size_t>(n)),
            outs(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          const auto ru = static_cast<size_t>(r);
          streams.push_back(
              std::make_unique<backend::cpu::CpuStream>("comm" + std::to_string(r), 1));
          ins[ru] = {in[ru].view()};
          outs[ru] = {cpu_out[ru].view()};
          ASSERT_TRUE(group->rank(r).allReduce(ins[ru], outs[ru], op, *streams[ru]).ok());
        }
        for (auto& s : streams) ASSERT_TRUE(s->synchronize().ok());
        std::vector<Buffer> gpu_math = hostAllReduce(in, op);
        for (int r = 0; r < n; ++r)
          EXPECT_TRUE(sameBytes(gpu_math[static_cast<size_t>(r)], cpu_out[static_cast<size_t>(r)]))
              << n << " ranks, " << ir::dtypeName(dtype) << ", op " << static_cast<int>(op)
              << ", rank " << r;
      }
    }
  }
}

TEST(CudaCommunicators, JoinCudaDevicesOnly) {
  auto cpu =
      backend::cpu::cpuBackend().createDevice(ir::Device{::tandem::testing::kind("cpu"), 0}, {});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  backend::Device* group[] = {cpu->get()};
  auto comms = backend::cuda::makeCommunicators(group);
  ASSERT_FALSE(comms.ok());
  EXPECT_EQ(comms.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(comms.status().message().find("cpu:0 is not a CUDA device"), std::string::npos)
      << comms.status();
}

// ---- GPU ------------------------------------------------------------------------------

/// Logical devices on the given GPUs and their communicators.
struct Ranks {
  explicit Ranks(const std::vector<int>& gpus) {
    std::vector<backend::Device*> raw;
    for (size_t r = 0; r < gpus.size(); ++r) {
      backend::DeviceOptions o;
      o.index = static_cast<int>(r);
      // cuda:G, cuda:G.1, ...: each logical device on GPU G its own share.
      const int share = static_cast<int>(std::count(gpus.begin(), gpus.begin() + r, gpus[r]));
      auto d = backend::cuda::cudaBackend().createDevice(
          ir::Device{.kind = ::tandem::testing::kind("cuda"), .index = gpus[r], .share = share}, o);
      EXPECT_TRUE(d.ok()) << d.status();
      if (!d.ok()) return;
      devices.push_back(std::move(*d));
      raw.push_back(devices.back().get());
    }
    auto g = backend::cuda::cudaBackend().createCommunicators(raw);
    EXPECT_TRUE(g.ok()) << g.status();
    if (g.ok()) group = std::move(*g);
  }
  bool ok() const { return group != nullptr; }
  int size() const { return static_cast<int>(devices.size()); }
  backend::Device& device(int r) { return *devices[static_cast<size_t>(r)]; }

  /// Rank r's copy of a host buffer in its device memory.
  TensorView upload(int r, Buffer& host) {
    auto m = device(r).allocate(host.type().bytes());
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    memory.push_back(std::move(*m));
    TensorView v = memory.back().view(host.type());
    EXPECT_TRUE(device(r).copyFromHost(host.view(), v, device(r).commStream()).ok());
    return v;
  }
  /// Device memory of `type`, poisoned (NaN in f32 and bf16) so that an unwritten result shows.
  TensorView poisoned(int r, const ir::TensorType& type) {
    auto m = device(r).allocate(type.bytes());
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    EXPECT_EQ(cudaMemset(m->data(), 0xFF, static_cast<size_t>(type.bytes())), cudaSuccess);
    memory.push_back(std::move(*m));
    return memory.back().view(type);
  }
  Buffer download(int r, const TensorView& v) {
    Buffer b(v.type);
    EXPECT_TRUE(device(r).copyToHost(v, b.view(), device(r).commStream()).ok());
    EXPECT_TRUE(device(r).commStream().synchronize().ok());
    return b;
  }
  void synchronize() {
    for (auto& d : devices) {
      absl::Status s = d->commStream().synchronize();
      EXPECT_TRUE(s.ok()) << s;
    }
  }

  std::vector<std::unique_ptr<backend::Device>> devices;
  std::unique_ptr<backend::CommunicatorGroup> group;
  std::vector<backend::DeviceBuffer> memory;
};

/// all_reduce of `in` (a tensor per rank) through the group: grouped as the executor
/// calls it, or each rank on its own (the last rank's call runs it); in place or not.
std::vector<Buffer> deviceAllReduce(Ranks& ranks, std::vector<Buffer>& in, ReduceOp op,
                                    bool grouped, bool in_place) {
  const int n = ranks.size();
  std::vector<std::vector<TensorView>> ins(static_cast<size_t>(n)), outs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const auto ru = static_cast<size_t>(r);
    ins[ru] = {ranks.upload(r, in[ru])};
    outs[ru] = {in_place ? ins[ru][0] : ranks.poisoned(r, in[ru].type())};
  }
  if (grouped) {
    EXPECT_TRUE(ranks.group->groupStart().ok());
  }
  for (int r = 0; r < n; ++r) {
    const auto ru = static_cast<size_t>(r);
    absl::Status s =
        ranks.group->rank(r).allReduce(ins[ru], outs[ru], op, ranks.device(r).commStream());
    EXPECT_TRUE(s.ok()) << s;
  }
  if (grouped) {
    absl::Status s = ranks.group->groupEnd();
    EXPECT_TRUE(s.ok()) << s;
  }
  ranks.synchronize();
  std::vector<Buffer> out;
  for (int r = 0; r < n; ++r) out.push_back(ranks.download(r, outs[static_cast<size_t>(r)][0]));
  return out;
}

TEST(CudaCommunicatorsOnOneGpu, AllReduceIsTheHostMathBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  for (int n : {2, 3}) {
    Ranks ranks(std::vector<int>(static_cast<size_t>(n), 0));
    ASSERT_TRUE(ranks.ok());
    for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
      for (ReduceOp op : kOps)
        for (bool grouped : {true, false}) {
          const ir::TensorType type{dtype, {3, 1001}};
          std::vector<Buffer> in = randomRanks(rng, n, type);
          std::vector<Buffer> want = hostAllReduce(in, op);
          std::vector<Buffer> got = deviceAllReduce(ranks, in, op, grouped, /*in_place=*/!grouped);
          for (int r = 0; r < n; ++r)
            EXPECT_TRUE(sameBytes(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)]))
                << n << " ranks, " << ir::dtypeName(dtype) << ", op " << static_cast<int>(op)
                << (grouped ? ", grouped" : ", one by one") << ", rank " << r;
        }
  }
}

TEST(CudaCommunicatorsOnOneGpu, AllReducesSeveralTensorsInOneCall) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  const int n = 3;
  Ranks ranks({0, 0, 0});
  ASSERT_TRUE(ranks.ok());
  std::vector<Buffer> a = randomRanks(rng, n, f32({77}));
  std::vector<Buffer> b = randomRanks(rng, n, bf16({5, 3}));
  std::vector<std::vector<TensorView>> ins(n), outs(n);
  for (int r = 0; r < n; ++r) {
    ins[r] = {ranks.upload(r, a[r]), ranks.upload(r, b[r])};
    outs[r] = {ranks.poisoned(r, a[r].type()), ranks.poisoned(r, b[r].type())};
  }
  ASSERT_TRUE(ranks.group->groupStart().ok());
  for (int r = 0; r < n; ++r)
    ASSERT_TRUE(ranks.group->rank(r)
                    .allReduce(ins[r], outs[r], ReduceOp::kSum, ranks.device(r).commStream())
                    .ok());
  ASSERT_TRUE(ranks.group->groupEnd().ok());
  ranks.synchronize();
  std::vector<Buffer> want_a = hostAllReduce(a, ReduceOp::kSum);
  std::vector<Buffer> want_b = hostAllReduce(b, ReduceOp::kSum);
  for (int r = 0; r < n; ++r) {
    Buffer got_a = ranks.download(r, outs[r][0]), got_b = ranks.download(r, outs[r][1]);
    EXPECT_TRUE(sameBytes(got_a, want_a[r])) << "rank " << r;
    EXPECT_TRUE(sameBytes(got_b, want_b[r])) << "rank " << r;
  }
}

TEST(CudaCommunicatorsOnOneGpu, BroadcastCopiesTheRootsTensorToEveryRank) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  const int n = 3, root = 1;
  Ranks ranks({0, 0, 0});
  ASSERT_TRUE(ranks.ok());
  std::vector<Buffer> in = randomRanks(rng, n, f32({129}));
  std::vector<TensorView> ins, outs;
  for (int r = 0; r < n; ++r) {
    ins.push_back(ranks.upload(r, in[r]));
    // The root broadcasts in place (its out is its in), as the executor's variables do.
    outs.push_back(r == root ? ins.back() : ranks.poisoned(r, in[r].type()));
  }
  ASSERT_TRUE(ranks.group->groupStart().ok());
  for (int r = 0; r < n; ++r)
    ASSERT_TRUE(
        ranks.group->rank(r).broadcast(root, ins[r], outs[r], ranks.device(r).commStream()).ok());
  ASSERT_TRUE(ranks.group->groupEnd().ok());
  ranks.synchronize();
  for (int r = 0; r < n; ++r) {
    Buffer got = ranks.download(r, outs[r]);
    EXPECT_TRUE(sameBytes(got, in[root])) << "rank " << r;
  }
}

TEST(CudaCommunicatorsOnOneGpu, MismatchedCallsAreAnErrorNamingTheGroup) {
  TANDEM_SKIP_WITHOUT_GPU();
  Ranks ranks({0, 0});
  ASSERT_TRUE(ranks.ok());
  Buffer a(f32({4})), b(f32({5}));
  TensorView va = ranks.upload(0, a), vb = ranks.upload(1, b);
  ASSERT_TRUE(ranks.group->groupStart().ok());
  ASSERT_TRUE(ranks.group->rank(0)
                  .allReduce({va}, {va}, ReduceOp::kSum, ranks.device(0).commStream())
                  .ok());
  ASSERT_TRUE(ranks.group->rank(1)
                  .allReduce({vb}, {vb}, ReduceOp::kSum, ranks.device(1).commStream())
                  .ok());
  absl::Status s = ranks.group->groupEnd();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("same-GPU group (cuda:0, cuda:0.1): rank 1"), std::string::npos) << s;
}

// A step whose enqueue failed between two ranks' shares (the executor closes the group
// then): the share left without its partner is dropped at the group's end, with an error
// naming the group, and the next collective pairs up as if it never was.
TEST(CudaCommunicatorsOnOneGpu, AShareWhosePartnerNeverCameIsDroppedAtGroupEnd) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  Ranks ranks({0, 0});
  ASSERT_TRUE(ranks.ok());
  Buffer lonely(f32({8}));
  TensorView v = ranks.upload(0, lonely);
  ASSERT_TRUE(ranks.group->groupStart().ok());
  ASSERT_TRUE(
      ranks.group->rank(0).allReduce({v}, {v}, ReduceOp::kSum, ranks.device(0).commStream()).ok());
  absl::Status ended = ranks.group->groupEnd();
  EXPECT_FALSE(ended.ok());
  EXPECT_NE(ended.message().find("never came"), std::string::npos) << ended;
  std::vector<Buffer> in = randomRanks(rng, 2, f32({33}));
  std::vector<Buffer> got = deviceAllReduce(ranks, in, ReduceOp::kSum, /*grouped=*/true, false);
  std::vector<Buffer> want = hostAllReduce(in, ReduceOp::kSum);
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(sameBytes(got[r], want[r])) << "rank " << r;
}

TEST(CudaCommunicatorsNccl, OneRankKeepsItsValues) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  Ranks ranks({0});
  ASSERT_TRUE(ranks.ok());
  for (ReduceOp op : kOps) {
    std::vector<Buffer> in = randomRanks(rng, 1, f32({1001}));
    std::vector<Buffer> got = deviceAllReduce(ranks, in, op, /*grouped=*/true, false);
    EXPECT_TRUE(sameBytes(got[0], in[0])) << "op " << static_cast<int>(op);
  }
}

TEST(CudaCommunicatorsNccl, AcrossGpusAllReduceAndBroadcast) {
  TANDEM_SKIP_WITHOUT_GPU();
  absl::StatusOr<int> count = backend::cuda::gpuCount();
  if (!count.ok() || *count < 2) {
    GTEST_SKIP() << "needs 2 GPUs";
  }
  std::mt19937 rng(7);
  Ranks ranks({0, 1});
  ASSERT_TRUE(ranks.ok());
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
    for (ReduceOp op : kOps) {
      std::vector<Buffer> in = randomRanks(rng, 2, ir::TensorType{dtype, {2049}});
      std::vector<Buffer> want = hostAllReduce(in, op);
      std::vector<Buffer> got = deviceAllReduce(ranks, in, op, /*grouped=*/true, false);
      // NCCL's order and its mean (a pre-scaled sum) may differ from ours by a rounding.
      const double tol = dtype == ir::DType::kBF16 ? 1e-2 : 1e-6;
      for (int r = 0; r < 2; ++r)
        EXPECT_LE(scaledError(got[r], want[r]), tol)
            << ir::dtypeName(dtype) << ", op " << static_cast<int>(op) << ", rank " << r;
    }
  std::vector<Buffer> in = randomRanks(rng, 2, f32({300}));
  TensorView src = ranks.upload(0, in[0]), dst = ranks.poisoned(1, in[1].type());
  ASSERT_TRUE(ranks.group->groupStart().ok());
  ASSERT_TRUE(ranks.group->rank(0).broadcast(0, src, src, ranks.device(0).commStream()).ok());
  ASSERT_TRUE(ranks.group->rank(1).broadcast(0, dst, dst, ranks.device(1).commStream()).ok());
  ASSERT_TRUE(ranks.group->groupEnd().ok());
  ranks.synchronize();
  Buffer got = ranks.download(1, dst);
  EXPECT_TRUE(sameBytes(got, in[0]));
}

// ---- reduce_scatter and all_gather ----------------------------------------------------

std::vector<int64_t> balancedShards(int64_t n, int ranks) {
  std::vector<int64_t> sizes;
  for (int r = 0; r < ranks; ++r) sizes.push_back(n / ranks + (r < n % ranks ? 1 : 0));
  return sizes;
}

/// Each rank's shard by the host-compiled per-element math of the same-GPU kernel.
template <typename T>
std::vector<Buffer> hostReduceScatter(std::vector<Buffer>& in, const std::vector<int64_t>& sizes,
                                      ReduceOp op) {
  const int n = static_cast<int>(in.size());
  const TreePlan plan = planOf(n);
  std::vector<const T*> srcs;
  for (Buffer& b : in) srcs.push_back(static_cast<const T*>(b.view().data));
  std::vector<Buffer> out;
  for (int r = 0; r < n; ++r) {
    out.emplace_back(ir::TensorType{in[0].type().dtype, {sizes[static_cast<size_t>(r)]}});
    const int64_t first = backend::shardOffset(sizes, r);
    for (int64_t i = 0; i < sizes[static_cast<size_t>(r)]; ++i)
      backend::cuda::reduceScatterElement<T>(plan, kindOf(op), srcs.data(), first,
                                             static_cast<T*>(out.back().view().data), i);
  }
  return out;
}

std::vector<Buffer> hostReduceScatter(std::vector<Buffer>& in, const std::vector<int64_t>& sizes,
                                      ReduceOp op) {
  return in[0].type().dtype == ir::DType::kBF16 ? hostReduceScatter<uint16_t>(in, sizes, op)
                                                : hostReduceScatter<float>(in, sizes, op);
}

/// Whether `shard` holds elements [first, first + its size) of `whole`, byte for byte.
bool isSlice(Buffer& shard, Buffer& whole, int64_t first) {
  const int64_t element = ir::dtypeBytes(whole.type().dtype);
  return shard.type().dtype == whole.type().dtype &&
         std::memcmp(shard.view().data,
                     static_cast<const char*>(whole.view().data) + first * element,
                     static_cast<size_t>(shard.type().bytes())) == 0;
}

// The kernel's per-element math gives every rank the slice of the all_reduce bit for bit,
// and so the CPU local communicator's reduce_scatter (uneven shards, 2 to 6 ranks).
TEST(CudaCommunicatorMath, ReduceScatterElementsAreTheAllReduceSlice) {
  std::mt19937 rng(12);
  for (int n : {2, 3, 5, 6})
    for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
      for (ReduceOp op : kOps) {
        const ir::TensorType type{dtype, {1037}};
        const std::vector<int64_t> sizes = balancedShards(1037, n);
        std::vector<Buffer> in = randomRanks(rng, n, type);
        std::vector<Buffer> whole = hostAllReduce(in, op);
        std::vector<Buffer> shards = hostReduceScatter(in, sizes, op);
        auto group = backend::cpu::makeLocalCommunicators(n);
        std::vector<std::unique_ptr<backend::cpu::CpuStream>> streams;
        std::vector<Buffer> cpu;
        for (int r = 0; r < n; ++r) {
          const auto ru = static_cast<size_t>(r);
          streams.push_back(
              std::make_unique<backend::cpu::CpuStream>("comm" + std::to_string(r), 1));
          cpu.emplace_back(ir::TensorType{dtype, {sizes[ru]}});
          ASSERT_TRUE(group->rank(r)
                          .reduceScatter(in[ru].view(), cpu[ru].view(), sizes, op, *streams[ru])
                          .ok());
        }
        for (auto& s : streams) ASSERT_TRUE(s->synchronize().ok());
        for (int r = 0; r < n; ++r) {
          const auto ru = static_cast<size_t>(r);
          EXPECT_TRUE(isSlice(shards[ru], whole[0], backend::shardOffset(sizes, r)))
              << n << " ranks, " << ir::dtypeName(dtype) << ", op " << static_cast<int>(op)
              << ", rank " << r;
          EXPECT_TRUE(sameBytes(shards[ru], cpu[ru]))
              << n << " ranks, " << ir::dtypeName(dtype) << ", op " << static_cast<int>(op)
              << ", rank " << r << " against the CPU";
        }
      }
}

/// reduce_scatter then all_gather of `in` through the group, grouped as the executor calls
/// them; the shards and the gathered buffers, downloaded.
std::pair<std::vector<Buffer>, std::vector<Buffer>> deviceShardRoundTrip(
    Ranks& ranks, std::vector<Buffer>& in, const std::vector<int64_t>& sizes, ReduceOp op) {
  const int n = ranks.size();
  std::vector<TensorView> whole, shard, gathered;
  for (int r = 0; r < n; ++r) {
    const auto ru = static_cast<size_t>(r);
    whole.push_back(ranks.upload(r, in[ru]));
    shard.push_back(ranks.poisoned(r, ir::TensorType{in[ru].type().dtype, {sizes[ru]}}));
    gathered.push_back(ranks.poisoned(r, in[ru].type()));
  }
  EXPECT_TRUE(ranks.group->groupStart().ok());
  for (int r = 0; r < n; ++r) {
    absl::Status s = ranks.group->rank(r).reduceScatter(whole[static_cast<size_t>(r)],
                                                        shard[static_cast<size_t>(r)], sizes, op,
                                                        ranks.device(r).commStream());
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_TRUE(ranks.group->groupEnd().ok());
  EXPECT_TRUE(ranks.group->groupStart().ok());
  for (int r = 0; r < n; ++r) {
    absl::Status s = ranks.group->rank(r).allGather(shard[static_cast<size_t>(r)],
                                                    gathered[static_cast<size_t>(r)], sizes,
                                                    ranks.device(r).commStream());
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_TRUE(ranks.group->groupEnd().ok());
  ranks.synchronize();
  std::pair<std::vector<Buffer>, std::vector<Buffer>> out;
  for (int r = 0; r < n; ++r) {
    out.first.push_back(ranks.download(r, shard[static_cast<size_t>(r)]));
    out.second.push_back(ranks.download(r, gathered[static_cast<size_t>(r)]));
  }
  return out;
}

TEST(CudaCommunicatorsOnOneGpu, ReduceScatterAndAllGatherAreTheHostMathBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (int n : {2, 3}) {
    Ranks ranks(std::vector<int>(static_cast<size_t>(n), 0));
    ASSERT_TRUE(ranks.ok());
    for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
      for (ReduceOp op : kOps) {
        const std::vector<int64_t> sizes = balancedShards(2051, n);
        std::vector<Buffer> in = randomRanks(rng, n, ir::TensorType{dtype, {2051}});
        std::vector<Buffer> want = hostAllReduce(in, op);
        auto [shards, gathered] = deviceShardRoundTrip(ranks, in, sizes, op);
        for (int r = 0; r < n; ++r) {
          const auto ru = static_cast<size_t>(r);
          EXPECT_TRUE(isSlice(shards[ru], want[0], backend::shardOffset(sizes, r)))
              << n << " ranks, " << ir::dtypeName(dtype) << ", op " << static_cast<int>(op)
              << ", rank " << r << "'s shard";
          EXPECT_TRUE(sameBytes(gathered[ru], want[0]))
              << n << " ranks, " << ir::dtypeName(dtype) << ", op " << static_cast<int>(op)
              << ", rank " << r << "'s gathered buffer";
        }
      }
  }
}

// NCCL with one rank: the shard is the whole buffer, and so is the gathered one.
TEST(CudaCommunicatorsNccl, OneRankShardIsItsBuffer) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  Ranks ranks({0});
  ASSERT_TRUE(ranks.ok());
  std::vector<Buffer> in = randomRanks(rng, 1, f32({1001}));
  auto [shards, gathered] = deviceShardRoundTrip(ranks, in, {1001}, ReduceOp::kSum);
  EXPECT_TRUE(sameBytes(shards[0], in[0]));
  EXPECT_TRUE(sameBytes(gathered[0], in[0]));
}

// Across two GPUs, even shards (ncclReduceScatter, ncclAllGather) and uneven ones (grouped
// ncclReduce and ncclBroadcast): with two ranks any order of a sum or a max gives the same
// bits, so the shards are the host all_reduce's slices exactly; mean within a rounding
// (NCCL may pre-scale), and the gathered buffers the shards' concatenation.
TEST(CudaCommunicatorsNccl, AcrossGpusReduceScatterAndAllGather) {
  TANDEM_SKIP_WITHOUT_GPU();
  absl::StatusOr<int> count = backend::cuda::gpuCount();
  if (!count.ok() || *count < 2) {
    GTEST_SKIP() << "needs 2 GPUs";
  }
  std::mt19937 rng(15);
  Ranks ranks({0, 1});
  ASSERT_TRUE(ranks.ok());
  for (int64_t len : {int64_t{2048}, int64_t{2049}})
    for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
      for (ReduceOp op : kOps) {
        const std::vector<int64_t> sizes = balancedShards(len, 2);
        std::vector<Buffer> in = randomRanks(rng, 2, ir::TensorType{dtype, {len}});
        std::vector<Buffer> want = hostAllReduce(in, op);
        auto [shards, gathered] = deviceShardRoundTrip(ranks, in, sizes, op);
        for (int r = 0; r < 2; ++r) {
          const auto ru = static_cast<size_t>(r);
          if (op != ReduceOp::kMean) {
            EXPECT_TRUE(isSlice(shards[ru], want[0], backend::shardOffset(sizes, r)))
                << len << ", " << ir::dtypeName(dtype) << ", op " << static_cast<int>(op)
                << ", rank " << r;
          }
          for (int q = 0; q < 2; ++q)
            EXPECT_TRUE(isSlice(shards[static_cast<size_t>(q)], gathered[ru],
                                backend::shardOffset(sizes, q)))
                << len << ", " << ir::dtypeName(dtype) << ", rank " << r << ", shard " << q;
        }
      }
}

}  // namespace
}  // namespace tandem::testing
