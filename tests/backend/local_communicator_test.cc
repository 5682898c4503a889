// The CPU backend's local communicator: collectives enqueued on each rank's CPU stream,
// met by the streams' workers, with one fixed reduction order.

#include "backend/cpu/local_communicator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/backend.h"
#include "backend/bf16.h"
#include "backend/cpu/copy_slice.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/shards.h"
#include "gtest/gtest.h"
#include "runtime/host_tensor.h"
#include "tests/device_kinds.h"

namespace tandem::backend::cpu {
namespace {

using runtime::HostTensor;

ir::TensorType f32(ir::Shape s) { return {ir::DType::kF32, std::move(s)}; }
// Scalars are built field by field: brace-initializing an empty Shape trips a GCC 12
// false "maybe-uninitialized" inside absl::InlinedVector.
ir::TensorType scalar(ir::DType d) {
  ir::TensorType t;
  t.dtype = d;
  return t;
}

// A comm stream per rank and the group's communicators.
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

float* data(const HostTensor& t) { return const_cast<float*>(t.f32()); }

TEST(LocalCommunicator, AllReduceSumsSeveralTensorsOnEveryRank) {
  constexpr int kRanks = 3;
  Ranks ranks(kRanks);
  // Per rank: a [5] f32 tensor and a scalar i32, reduced as one bucket.
  std::vector<HostTensor> a, b, out_a, out_b;
  for (int r = 0; r < kRanks; ++r) {
    a.emplace_back(f32({5}));
    b.emplace_back(scalar(ir::DType::kI32));
    out_a.emplace_back(f32({5}));
    out_b.emplace_back(scalar(ir::DType::kI32));
    for (int i = 0; i < 5; ++i) data(a[r])[i] = float(10 * r + i);
    const_cast<int32_t*>(b[r].i32())[0] = r + 1;
  }
  std::vector<std::vector<TensorView>> in(kRanks), out(kRanks);  // alive until synchronize
  for (int r = 0; r < kRanks; ++r) {
    in[r] = {a[r].view(), b[r].view()};
    out[r] = {out_a[r].view(), out_b[r].view()};
    ASSERT_TRUE(ranks.comm(r).allReduce(in[r], out[r], ReduceOp::kSum, ranks.stream(r)).ok());
  }
  ranks.synchronize();
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 5; ++i) EXPECT_EQ(out_a[r].f32()[i], float(30 + 3 * i)) << r << "," << i;
    EXPECT_EQ(out_b[r].i32()[0], 6);
  }
}

// bf16 (gradients reduced in bf16): summed in float in the same tree order as f32 and
// rounded once, so the result is the f32 reduction of the same values, rounded.
TEST(LocalCommunicator, Bf16AllReduceIsTheRoundedF32Reduction) {
  constexpr int kRanks = 3;
  constexpr int64_t kN = 2500;  // more than one 1024-element chunk
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    std::vector<HostTensor> low_in, low_out, ref_in, ref_out;
    for (int r = 0; r < kRanks; ++r) {
      low_in.emplace_back(ir::TensorType{ir::DType::kBF16, {kN}});
      low_out.emplace_back(ir::TensorType{ir::DType::kBF16, {kN}});
      ref_in.emplace_back(f32({kN}));
      ref_out.emplace_back(f32({kN}));
      auto* b = reinterpret_cast<bf16*>(low_in.back().view().data);
      for (int64_t i = 0; i < kN; ++i) {
        b[i] = u(rng);
        data(ref_in.back())[i] = b[i];
      }
    }
    auto reduce = [&](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      Ranks ranks(kRanks);
      std::vector<std::vector<TensorView>> iv(kRanks), ov(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        iv[r] = {in[r].view()};
        ov[r] = {out[r].view()};
        ASSERT_TRUE(ranks.comm(r).allReduce(iv[r], ov[r], op, ranks.stream(r)).ok());
      }
      ranks.synchronize();
    };
    reduce(low_in, low_out);
    reduce(ref_in, ref_out);
    for (int r = 0; r < kRanks; ++r) {
      const auto* b = reinterpret_cast<const bf16*>(low_out[r].view().data);
      for (int64_t i = 0; i < kN; ++i)
        ASSERT_EQ(b[i].bits, bf16(ref_out[r].f32()[i]).bits) << "rank " << r << ", element " << i;
    }
  }
}

// bf16 gradients are all-reduced in place (in == out), by 2 or 3 devices: within bf16's
// rounding of the f32 all_reduce of the same values, and the same bits on every run
// however the ranks arrive (rank 0 late in the second run).
TEST(LocalCommunicator, Bf16AllReduceInPlaceIsNearF32AndDeterministic) {
  constexpr int64_t kN = 1500;
  for (int ranks_n : {2, 3}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
      SCOPED_TRACE(std::to_string(ranks_n) + " ranks, op " + std::to_string(int(op)));
      std::mt19937 rng(40 + ranks_n);
      std::uniform_real_distribution<float> u(-1, 1);
      std::vector<std::vector<bf16>> values(static_cast<size_t>(ranks_n));
      for (auto& v : values)
        for (int64_t i = 0; i < kN; ++i) v.push_back(u(rng));
      // Each rank's tensor of `dtype` holding `values`, reduced in place.
      auto reduce = [&](ir::DType dtype, bool rank0_late) {
        Ranks ranks(ranks_n);
        std::vector<HostTensor> t;
        std::vector<std::vector<TensorView>> v(static_cast<size_t>(ranks_n));
        for (int r = 0; r < ranks_n; ++r) {
          t.emplace_back(ir::TensorType{dtype, {kN}});
          for (int64_t i = 0; i < kN; ++i) {
            const bf16 x = values[static_cast<size_t>(r)][static_cast<size_t>(i)];
            if (dtype == ir::DType::kBF16)
              reinterpret_cast<bf16*>(t.back().view().data)[i] = x;
            else
              data(t.back())[i] = x;
          }
        }
        for (int r = 0; r < ranks_n; ++r) {
          v[r] = {t[r].view()};
          if (r == 0 && rank0_late) {
            static_cast<CpuStream&>(ranks.stream(0)).enqueue([] {
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              return absl::OkStatus();
            });
          }
          EXPECT_TRUE(ranks.comm(r).allReduce(v[r], v[r], op, ranks.stream(r)).ok());
        }
        ranks.synchronize();
        return t;
      };
      const std::vector<HostTensor> ref = reduce(ir::DType::kF32, false);
      const std::vector<HostTensor> low = reduce(ir::DType::kBF16, false);
      const std::vector<HostTensor> again = reduce(ir::DType::kBF16, true);
      double worst = 0;
      for (int r = 0; r < ranks_n; ++r) {
        const auto* a = reinterpret_cast<const bf16*>(low[r].view().data);
        const auto* b = reinterpret_cast<const bf16*>(again[r].view().data);
        ASSERT_EQ(std::memcmp(a, b, kN * sizeof(bf16)), 0) << "rank " << r;
        ASSERT_EQ(std::memcmp(a, low[0].view().data, kN * sizeof(bf16)), 0) << "rank " << r;
        for (int64_t i = 0; i < kN; ++i) {
          const double want = ref[r].f32()[i], got = float(a[i]);
          const double err = std::abs(got - want) / std::max(std::abs(want), 1e-30);
          worst = std::max(worst, want == got ? 0.0 : err);
        }
      }
      EXPECT_LE(worst, 1e-2);
    }
  }
}

TEST(LocalCommunicator, AllReduceInPlaceMeanAndMax) {
  constexpr int kRanks = 4;
  for (ReduceOp op : {ReduceOp::kMean, ReduceOp::kMax}) {
    Ranks ranks(kRanks);
    std::vector<HostTensor> t;
    std::vector<std::vector<TensorView>> v(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      t.emplace_back(f32({7}));
      for (int i = 0; i < 7; ++i) data(t[r])[i] = float(r * i);
    }
    for (int r = 0; r < kRanks; ++r) {
      v[r] = {t[r].view()};
      ASSERT_TRUE(ranks.comm(r).allReduce(v[r], v[r], op, ranks.stream(r)).ok());  // aliasing
    }
    ranks.synchronize();
    for (int r = 0; r < kRanks; ++r)
      for (int i = 0; i < 7; ++i)
        EXPECT_EQ(t[r].f32()[i], op == ReduceOp::kMax ? float(3 * i) : float(6 * i) / 4);
  }
}

// The order of the tree: split at the largest power of two below the count.
TEST(LocalCommunicator, TreeOrder) {
  // 1e16 + 1 loses the 1 in doubles; the order decides which 1s survive.
  EXPECT_EQ(treeReduce({1e16, 1, -1e16}, ReduceOp::kSum), 0.0);        // (1e16 + 1) - 1e16
  EXPECT_EQ(treeReduce({1e16, -1e16, 1}, ReduceOp::kSum), 1.0);        // (1e16 - 1e16) + 1
  EXPECT_EQ(treeReduce({1, 1e16, -1e16, 1}, ReduceOp::kSum), 0.0);     // (1 + 1e16) + (-1e16 + 1)
  EXPECT_EQ(treeReduce({1e16, -1e16, 1, 1, 1}, ReduceOp::kSum), 3.0);  // ((a+b)+(c+d))+e
  EXPECT_EQ(treeReduce({3, 9, 4}, ReduceOp::kMax), 9.0);
  EXPECT_EQ(treeReduce({2, 4, 6, 8}, ReduceOp::kMean), 5.0);
}

// The fixed order, not arrival order, decides the sum: the same bits every time, on every
// rank.
TEST(LocalCommunicator, ReductionOrderIsFixed) {
  constexpr int kRanks = 3;
  const float values[kRanks] = {1e8f, 1.0f, -1e8f};  // (1e8 + 1) - 1e8 == 0 in f32
  for (int trial = 0; trial < 20; ++trial) {
    Ranks ranks(kRanks);
    std::vector<HostTensor> t;
    std::vector<std::vector<TensorView>> v(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      t.emplace_back(scalar(ir::DType::kF32));
      data(t[r])[0] = values[r];
    }
    for (int r = 0; r < kRanks; ++r) {
      v[r] = {t[r].view()};
      if (r == 0) {  // rank 0 arrives late
        static_cast<CpuStream&>(ranks.stream(0)).enqueue([trial] {
          std::this_thread::sleep_for(std::chrono::microseconds(trial * 50));
          return absl::OkStatus();
        });
      }
      ASSERT_TRUE(ranks.comm(r).allReduce(v[r], v[r], ReduceOp::kSum, ranks.stream(r)).ok());
    }
    ranks.synchronize();
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(t[r].f32()[0], (1e8f + 1.0f) + -1e8f);
  }
}

// Reducing within groups of a power-of-two size, then across the groups, then sharing back
// inside each group gives the flat all_reduce's bits: the tree splits where groups do.
TEST(LocalCommunicator, HierarchicalEqualsFlatBitForBit) {
  constexpr int kRanks = 8, kGroup = 2, kN = 4096;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1e4f, 1e4f);
  std::vector<std::vector<float>> values(kRanks, std::vector<float>(kN));
  for (auto& v : values)
    for (float& x : v) x = u(rng);

  std::vector<HostTensor> flat, hier;
  for (int r = 0; r < kRanks; ++r) {
    flat.emplace_back(f32({kN}));
    hier.emplace_back(f32({kN}));
    std::copy(values[r].begin(), values[r].end(), data(flat[r]));
    std::copy(values[r].begin(), values[r].end(), data(hier[r]));
  }
  std::vector<std::vector<TensorView>> fv(kRanks), hv(kRanks);
  for (int r = 0; r < kRanks; ++r) fv[r] = {flat[r].view()}, hv[r] = {hier[r].view()};

  Ranks all(kRanks);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_TRUE(all.comm(r).allReduce(fv[r], fv[r], ReduceOp::kSum, all.stream(r)).ok());
  all.synchronize();

  // Within each pair, then across the pairs' first ranks, then back within each pair.
  std::vector<std::unique_ptr<Ranks>> pairs;
  for (int g = 0; g < kRanks / kGroup; ++g) pairs.push_back(std::make_unique<Ranks>(kGroup));
  Ranks leaders(kRanks / kGroup);
  for (int r = 0; r < kRanks; ++r) {
    Ranks& p = *pairs[r / kGroup];
    ASSERT_TRUE(
        p.comm(r % kGroup).allReduce(hv[r], hv[r], ReduceOp::kSum, p.stream(r % kGroup)).ok());
  }
  for (auto& p : pairs) p->synchronize();
  for (int g = 0; g < kRanks / kGroup; ++g)
    ASSERT_TRUE(leaders.comm(g)
                    .allReduce(hv[g * kGroup], hv[g * kGroup], ReduceOp::kSum, leaders.stream(g))
                    .ok());
  leaders.synchronize();
  for (int r = 0; r < kRanks; ++r) {
    Ranks& p = *pairs[r / kGroup];
    ASSERT_TRUE(p.comm(r % kGroup)
                    .broadcast(0, hier[r - r % kGroup].view(), hier[r].view(), p.stream(r % kGroup))
                    .ok());
  }
  for (auto& p : pairs) p->synchronize();

  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(0, std::memcmp(flat[r].f32(), hier[r].f32(), kN * sizeof(float))) << "rank " << r;
}

TEST(LocalCommunicator, Broadcast) {
  constexpr int kRanks = 3;
  Ranks ranks(kRanks);
  HostTensor src(f32({4}));
  for (int i = 0; i < 4; ++i) data(src)[i] = float(i + 1);
  std::vector<HostTensor> dst;
  for (int r = 0; r < kRanks; ++r) dst.emplace_back(f32({4}));
  for (int r = 0; r < kRanks; ++r)
    ASSERT_TRUE(
        ranks.comm(r)
            .broadcast(1, r == 1 ? src.view() : TensorView{}, dst[r].view(), ranks.stream(r))
            .ok());
  ranks.synchronize();
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(dst[r].f32()[i], float(i + 1));
}

// A stream of another backend is refused with a message, never cast blindly.
TEST(LocalCommunicator, RefusesAStreamOfAnotherBackend) {
  class OtherBackend final : public Backend {
   public:
    const ir::TargetInfo& target() const override { return target_; }
    absl::StatusOr<std::unique_ptr<Device>> createDevice(const ir::Device&,
                                                         const DeviceOptions&) const override {
      return absl::UnimplementedError("not here");
    }
    absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createCommunicators(
        absl::Span<Device* const>) const override {
      return absl::UnimplementedError("not here");
    }
    std::string describe() const override { return "other"; }
    std::string version() const override { return "other"; }
    const ir::TargetInfo target_{.kind = ::tandem::testing::kind("cuda"), .alignment = 256};
  } other_backend;
  class OtherStream final : public Stream {
   public:
    explicit OtherStream(const Backend& b) : backend_(b) {}
    const Backend& backend() const override { return backend_; }
    const std::string& name() const override { return name_; }
    void record(Event&) override {}
    void wait(Event&) override {}
    std::unique_ptr<Event> createEvent() override { return nullptr; }
    void hostCallback(absl::AnyInvocable<void() &&>) override {}
    absl::Status synchronize() override { return absl::OkStatus(); }

   private:
    const Backend& backend_;
    std::string name_ = "cuda:0/comm";
  } other(other_backend);
  Ranks ranks(1);
  HostTensor t(f32({2}));
  std::vector<TensorView> v{t.view()};
  absl::Status s = ranks.comm(0).allReduce(v, v, ReduceOp::kSum, other);
  EXPECT_EQ(s.message(), "stream cuda:0/comm is not a CPU stream: CPU work cannot go on it");
}

TEST(CopySlice, SplitsAndJoinsAlongAnyAxis) {
  HostTensor whole(f32({2, 5, 3}));
  for (int i = 0; i < 30; ++i) data(whole)[i] = float(i);
  HostTensor part(f32({2, 2, 3}));
  copySlice(whole.view(), part.view(), 1, 3, /*into_whole=*/false);  // rows 3..4 of axis 1
  const float expected[12] = {9, 10, 11, 12, 13, 14, 24, 25, 26, 27, 28, 29};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(part.f32()[i], expected[i]) << i;
  HostTensor back(f32({2, 5, 3}));
  copySlice(back.view(), part.view(), 1, 3, /*into_whole=*/true);
  EXPECT_EQ(back.f32()[9], 9);
  EXPECT_EQ(back.f32()[29], 29);
  EXPECT_EQ(back.f32()[8], 0);  // untouched outside the slice
}

// ---- reduce_scatter and all_gather -------------------------------------------------
// A shard is the same bits as that slice of the all_reduce (the sharded weight update's
// premise: a sharded step equals the replicated one bit for bit), uneven shards included,
// and all_gather is the concatenation of the shards.

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
TEST(LocalCommunicatorReduceScatter, ShardIsTheAllReduceSliceBitForBit) {
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
TEST(LocalCommunicatorReduceScatter, TheTestDataTellsReductionOrdersApart) {
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
TEST(LocalCommunicatorReduceScatter, VeryUnevenShards) {
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
TEST(LocalCommunicatorAllGather, IsTheConcatenationOnEveryRank) {
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

TEST(LocalCommunicatorAllGather, AfterReduceScatterIsTheAllReduce) {
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
TEST(LocalCommunicatorReduceScatter, CallsThatDoNotFitTheirShardsAreRefused) {
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
