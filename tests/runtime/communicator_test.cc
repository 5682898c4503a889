#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/host_tensor.h"
#include "runtime/local_communicator.h"

namespace tandem::runtime {
namespace {

ir::TensorType f32(ir::Shape s) { return {ir::DType::kF32, std::move(s)}; }
// Scalars are built field by field: brace-initializing an empty Shape trips a GCC 12
// false "maybe-uninitialized" inside absl::InlinedVector.
ir::TensorType scalar(ir::DType d) {
  ir::TensorType t;
  t.dtype = d;
  return t;
}

// Runs `body(rank)` on one thread per rank, as the comm streams would.
template <typename F>
void onRanks(int ranks, F body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { body(r); });
  for (auto& t : threads) t.join();
}

TEST(LocalCommunicator, AllReduceSumsSeveralTensorsOnEveryRank) {
  constexpr int kRanks = 3;
  LocalCommunicator comm(kRanks);
  // Per rank: a [5] f32 tensor and a scalar i32, reduced as one bucket.
  std::vector<HostTensor> a, b, out_a, out_b;
  for (int r = 0; r < kRanks; ++r) {
    a.emplace_back(f32({5}));
    b.emplace_back(scalar(ir::DType::kI32));
    out_a.emplace_back(f32({5}));
    out_b.emplace_back(scalar(ir::DType::kI32));
    for (int i = 0; i < 5; ++i) const_cast<float*>(a[r].f32())[i] = float(10 * r + i);
    const_cast<int32_t*>(b[r].i32())[0] = r + 1;
  }
  onRanks(kRanks, [&](int r) {
    TensorView in[2] = {a[r].view(), b[r].view()};
    TensorView out[2] = {out_a[r].view(), out_b[r].view()};
    comm.allReduce(r, in, out, ReduceOp::kSum);
  });
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 5; ++i) EXPECT_EQ(out_a[r].f32()[i], float(30 + 3 * i)) << r << "," << i;
    EXPECT_EQ(out_b[r].i32()[0], 6);
  }
}

TEST(LocalCommunicator, AllReduceInPlaceMeanAndMax) {
  constexpr int kRanks = 4;
  for (ReduceOp op : {ReduceOp::kMean, ReduceOp::kMax}) {
    LocalCommunicator comm(kRanks);
    std::vector<HostTensor> t;
    for (int r = 0; r < kRanks; ++r) {
      t.emplace_back(f32({7}));
      for (int i = 0; i < 7; ++i) const_cast<float*>(t[r].f32())[i] = float(r * i);
    }
    onRanks(kRanks, [&](int r) {
      TensorView v[1] = {t[r].view()};
      comm.allReduce(r, v, v, op);  // out aliases in
    });
    for (int r = 0; r < kRanks; ++r)
      for (int i = 0; i < 7; ++i)
        EXPECT_EQ(t[r].f32()[i], op == ReduceOp::kMax ? float(3 * i) : float(6 * i) / 4);
  }
}

// Rank order, not arrival order, decides the sum: the same bits every time, on every rank.
TEST(LocalCommunicator, ReductionOrderIsFixed) {
  constexpr int kRanks = 3;
  const float values[kRanks] = {1e8f, 1.0f, -1e8f};  // (1e8 + 1) - 1e8 == 0 in f32
  for (int trial = 0; trial < 20; ++trial) {
    LocalCommunicator comm(kRanks);
    std::vector<HostTensor> t;
    for (int r = 0; r < kRanks; ++r) {
      t.emplace_back(scalar(ir::DType::kF32));
      const_cast<float*>(t[r].f32())[0] = values[r];
    }
    onRanks(kRanks, [&](int r) {
      if (r == 0) std::this_thread::sleep_for(std::chrono::microseconds(trial * 50));
      TensorView v[1] = {t[r].view()};
      comm.allReduce(r, v, v, ReduceOp::kSum);
    });
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(t[r].f32()[0], (1e8f + 1.0f) + -1e8f);
  }
}

TEST(LocalCommunicator, BroadcastAndGather) {
  constexpr int kRanks = 3;
  LocalCommunicator comm(kRanks);
  HostTensor src(f32({4}));
  for (int i = 0; i < 4; ++i) const_cast<float*>(src.f32())[i] = float(i + 1);
  std::vector<HostTensor> dst;
  for (int r = 0; r < kRanks; ++r) dst.emplace_back(f32({4}));
  onRanks(kRanks,
          [&](int r) { comm.broadcast(r, 1, r == 1 ? src.view() : TensorView{}, dst[r].view()); });
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(dst[r].f32()[i], float(i + 1));

  // Gather [2,r+1] slices along axis 1 into a [2,6] tensor on rank 2.
  std::vector<HostTensor> parts;
  for (int r = 0; r < kRanks; ++r) {
    parts.emplace_back(f32({2, r + 1}));
    for (int i = 0; i < 2 * (r + 1); ++i)
      const_cast<float*>(parts[r].f32())[i] = float(100 * r + i);
  }
  HostTensor whole(f32({2, 6}));
  onRanks(kRanks, [&](int r) { comm.gather(r, 2, parts[r].view(), whole.view(), 1); });
  const float expected[12] = {0, 100, 101, 200, 201, 202, 1, 102, 103, 203, 204, 205};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(whole.f32()[i], expected[i]) << i;
}

TEST(CopySlice, SplitsAndJoinsAlongAnyAxis) {
  HostTensor whole(f32({2, 5, 3}));
  for (int i = 0; i < 30; ++i) const_cast<float*>(whole.f32())[i] = float(i);
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

}  // namespace
}  // namespace tandem::runtime
