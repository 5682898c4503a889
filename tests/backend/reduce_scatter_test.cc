// reduce_scatter and all_gather on the CPU backend's local communicator: a shard is the
// same bits as that slice of the all_reduce (the sharded weight update's premise: a
// sharded step equals the replicated one bit for bit), uneven shards included, and
// all_gather is the concatenation of the shards.

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/bf16.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/cpu/local_communicator.h"
#include "backend/shards.h"
#include "gtest/gtest.h"
#include "runtime/host_tensor.h"

namespace tandem::backend::cpu {
namespace {

using runtime::HostTensor;

struct Ranks {
  explicit Ranks(int n) : group(makeLocalCommunicators(n)) {
    for (int r = 0; r < n; ++r)
      streams.push_back(std::make_unique<CpuStream>("comm" + std::to_string(r), 1));
  }
  Communicator& comm(int r) { return group->rank(r); }
  Stream& stream(int r) { return *streams[static_cast<size_t>(r)]; }
  void synchronize() {
    for (auto& s : streams) EXPECT_TRUE(s->synchronize().ok());
  }
  std::unique_ptr<CommunicatorGroup> group;
  std::vector<std::unique_ptr<CpuStream>> streams;
};

// Values whose sums depend on the order they are added in: magnitudes from 1e-4 to 1e4,
// both signs (so a reduction in another order than the tree's shows in the bits).
std::vector<HostTensor> buffers(int ranks, ir::DType dtype, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1, 1), exponent(-4, 4);
  std::vector<HostTensor> out;
  for (int r = 0; r < ranks; ++r) {
    out.emplace_back(ir::TensorType{dtype, {n}});
    void* p = out.back().view().data;
    for (int64_t i = 0; i < n; ++i) {
      const float v = mantissa(rng) * std::pow(10.f, exponent(rng));
      if (dtype == ir::DType::kBF16)
        static_cast<bf16*>(p)[i] = bf16(v);
      else
        static_cast<float*>(p)[i] = v;
    }
  }
  return out;
}

// Shard sizes as balanced as they go, the first ranks one larger (uneven unless n divides).
std::vector<int64_t> balanced(int64_t n, int ranks) {
  std::vector<int64_t> sizes;
  for (int r = 0; r < ranks; ++r) sizes.push_back(n / ranks + (r < n % ranks ? 1 : 0));
  return sizes;
}

std::vector<HostTensor> allReduce(std::vector<HostTensor>& in, ReduceOp op) {
  const int n = static_cast<int>(in.size());
  Ranks ranks(n);
  std::vector<HostTensor> out;
  std::vector<std::vector<TensorView>> iv(static_cast<size_t>(n)), ov(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    out.emplace_back(in[r].type);
    iv[r] = {in[r].view()};
    ov[r] = {out[r].view()};
    EXPECT_TRUE(ranks.comm(r).allReduce(iv[r], ov[r], op, ranks.stream(r)).ok());
  }
  ranks.synchronize();
  return out;
}

std::vector<HostTensor> reduceScatter(std::vector<HostTensor>& in,
                                      const std::vector<int64_t>& sizes, ReduceOp op) {
  const int n = static_cast<int>(in.size());
  Ranks ranks(n);
  std::vector<HostTensor> out;
  for (int r = 0; r < n; ++r) out.emplace_back(ir::TensorType{in[r].type.dtype, {sizes[r]}});
  for (int r = 0; r < n; ++r) {
    absl::Status s =
        ranks.comm(r).reduceScatter(in[r].view(), out[r].view(), sizes, op, ranks.stream(r));
    EXPECT_TRUE(s.ok()) << s;
  }
  ranks.synchronize();
  return out;
}

std::vector<HostTensor> allGather(std::vector<HostTensor>& shards,
                                  const std::vector<int64_t>& sizes) {
  const int n = static_cast<int>(shards.size());
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  Ranks ranks(n);
  std::vector<HostTensor> out;
  for (int r = 0; r < n; ++r) out.emplace_back(ir::TensorType{shards[r].type.dtype, {total}});
  for (int r = 0; r < n; ++r) {
    absl::Status s =
        ranks.comm(r).allGather(shards[r].view(), out[r].view(), sizes, ranks.stream(r));
    EXPECT_TRUE(s.ok()) << s;
  }
  ranks.synchronize();
  return out;
}

const char* bytesOf(const HostTensor& t) { return static_cast<const char*>(t.view().data); }

// The heart of it: every rank's shard equals its slice of the all_reduce, byte for byte,
// for 2, 3, 4 and 5 ranks (from 4 on the tree's order differs from adding in rank order),
// f32 and bf16 (summed in f32, rounded once), sum, mean and max, even and uneven shards.
TEST(ReduceScatter, ShardIsTheAllReduceSliceBitForBit) {
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
    for (int n : {2, 3, 4, 5})
      for (int64_t len : {int64_t{2503}, int64_t{60}})  // 2503: shards over a 1024 chunk
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
          SCOPED_TRACE(absl::StrCat(ir::dtypeName(dtype), ", ", n, " ranks, ", len,
                                    " elements, op ", static_cast<int>(op)));
          std::vector<HostTensor> in = buffers(n, dtype, len, 7 * n + static_cast<int>(len));
          const std::vector<int64_t> sizes = balanced(len, n);
          const std::vector<HostTensor> whole = allReduce(in, op);
          const std::vector<HostTensor> shards = reduceScatter(in, sizes, op);
          const int64_t element = ir::dtypeBytes(dtype);
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(
                std::memcmp(bytesOf(shards[r]), bytesOf(whole[0]) + shardOffset(sizes, r) * element,
                            static_cast<size_t>(sizes[r] * element)),
                0)
                << "rank " << r << "'s shard of " << absl::StrJoin(sizes, ",");
        }
}

// The data above can tell orders apart: adding five ranks in rank order gives other bits
// than the all_reduce's tree for some elements (else the test above could not fail).
TEST(ReduceScatter, TheTestDataTellsReductionOrdersApart) {
  std::vector<HostTensor> in = buffers(5, ir::DType::kF32, 2503, 7 * 5 + 2503);
  const std::vector<HostTensor> tree = allReduce(in, ReduceOp::kSum);
  int differ = 0;
  for (int64_t i = 0; i < 2503; ++i) {
    float sequential = 0;
    for (const HostTensor& t : in) sequential += t.f32()[i];
    differ += sequential != tree[0].f32()[i];
  }
  EXPECT_GT(differ, 0);
}

// Very uneven shards, a one-element shard included; a shard equals the slice whatever the
// others' sizes.
TEST(ReduceScatter, VeryUnevenShards) {
  std::vector<HostTensor> in = buffers(3, ir::DType::kF32, 1030, 11);
  const std::vector<int64_t> sizes = {1, 1028, 1};
  const std::vector<HostTensor> whole = allReduce(in, ReduceOp::kSum);
  const std::vector<HostTensor> shards = reduceScatter(in, sizes, ReduceOp::kSum);
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < sizes[r]; ++i)
      ASSERT_EQ(shards[r].f32()[i], whole[0].f32()[shardOffset(sizes, r) + i]) << r << "," << i;
}

// all_gather of every rank's shard is their concatenation on every rank, for f32, bf16 and
// i32; and all_gather after reduce_scatter is the all_reduce, bit for bit.
TEST(AllGather, IsTheConcatenationOnEveryRank) {
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16, ir::DType::kI32})
    for (int n : {2, 3}) {
      SCOPED_TRACE(absl::StrCat(ir::dtypeName(dtype), ", ", n, " ranks"));
      const std::vector<int64_t> sizes = balanced(1027, n);
      std::vector<HostTensor> shards;
      for (int r = 0; r < n; ++r) {
        shards.emplace_back(ir::TensorType{dtype, {sizes[r]}});
        auto* b = static_cast<unsigned char*>(shards.back().view().data);
        for (int64_t i = 0; i < shards.back().view().bytes(); ++i) b[i] = (r * 131 + i * 7) & 255;
      }
      const std::vector<HostTensor> gathered = allGather(shards, sizes);
      const int64_t element = ir::dtypeBytes(dtype);
      for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q)
          ASSERT_EQ(std::memcmp(bytesOf(gathered[r]) + shardOffset(sizes, q) * element,
                                bytesOf(shards[q]), static_cast<size_t>(sizes[q] * element)),
                    0)
              << "rank " << r << ", shard of rank " << q;
    }
}

TEST(AllGather, AfterReduceScatterIsTheAllReduce) {
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16}) {
    std::vector<HostTensor> in = buffers(3, dtype, 1001, 5);
    const std::vector<int64_t> sizes = balanced(1001, 3);
    const std::vector<HostTensor> whole = allReduce(in, ReduceOp::kSum);
    std::vector<HostTensor> shards = reduceScatter(in, sizes, ReduceOp::kSum);
    const std::vector<HostTensor> gathered = allGather(shards, sizes);
    for (int r = 0; r < 3; ++r)
      ASSERT_EQ(std::memcmp(bytesOf(gathered[r]), bytesOf(whole[0]),
                            static_cast<size_t>(whole[0].view().bytes())),
                0)
          << ir::dtypeName(dtype) << ", rank " << r;
  }
}

// A call that does not fit its sizes is refused before anything is enqueued, naming the
// call, the rank and what does not fit (the IR's shape rule makes this the caller's bug).
TEST(ReduceScatter, CallsThatDoNotFitTheirShardsAreRefused) {
  Ranks ranks(2);
  HostTensor whole(ir::TensorType{ir::DType::kF32, {5}}),
      shard(ir::TensorType{ir::DType::kF32, {3}});
  HostTensor low(ir::TensorType{ir::DType::kBF16, {3}});
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  EXPECT_EQ(message(ranks.comm(0).reduceScatter(whole.view(), shard.view(), std::vector<int64_t>{3},
                                                ReduceOp::kSum, ranks.stream(0))),
            "local communicator: reduce_scatter on rank 0: 1 shard sizes for 2 ranks");
  EXPECT_EQ(
      message(ranks.comm(0).reduceScatter(whole.view(), shard.view(), std::vector<int64_t>{3, 3},
                                          ReduceOp::kSum, ranks.stream(0))),
      "local communicator: reduce_scatter on rank 0: the buffer f32[5] is not the 6 "
      "elements the shards add up to");
  EXPECT_EQ(
      message(ranks.comm(1).reduceScatter(whole.view(), shard.view(), std::vector<int64_t>{3, 2},
                                          ReduceOp::kSum, ranks.stream(1))),
      "local communicator: reduce_scatter on rank 1: its shard f32[3] is not 2 elements");
  EXPECT_EQ(message(ranks.comm(0).allGather(low.view(), whole.view(), std::vector<int64_t>{3, 2},
                                            ranks.stream(0))),
            "local communicator: all_gather on rank 0: f32[5] and bf16[3] differ in dtype");
  EXPECT_EQ(
      message(ranks.comm(0).reduceScatter(whole.view(), shard.view(), std::vector<int64_t>{5, 0},
                                          ReduceOp::kSum, ranks.stream(0))),
      "local communicator: reduce_scatter on rank 0: a shard of no elements");
}

}  // namespace
}  // namespace tandem::backend::cpu
