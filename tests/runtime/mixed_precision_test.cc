// Training with --precision bf16: data parallelism keeps its promise (k devices give the
// parameters one device gives, within bf16's rounding rather than f32's), replicas stay
// bit-identical, and the run stays close to the f32 one it approximates.

#include <cstring>

#include "gtest/gtest.h"
#include "tests/runtime/runtime_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

TrainSetup bf16Options(int devices, int64_t batch) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.batch = batch;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  o.seed = 11;
  o.bf16 = true;
  return o;
}

// bf16 keeps 8 bits of mantissa: one rounding is up to 2^-9 relative. Different batch
// splits round different partial sums, so 1- and 2-device runs drift apart by a few
// roundings per step, not by f32's 1e-5.
constexpr double kBf16Tolerance = 2e-2;

/// Expects every parameter of `s` (every replica) within `tol` of `ref`'s first replica,
/// and that training moved the parameters at all.
void expectNear(const Snapshot& ref, const Snapshot& s, double tol) {
  for (const auto& [name, replicas] : ref) {
    for (const auto& replica : s.at(name))
      EXPECT_LE(relativeDifference(replica, replicas[0]), tol) << name;
  }
}

TEST(MixedPrecision, LenetOnOneAndTwoDevicesEndsWithTheSameParameters) {
  TANDEM_SKIP_WITHOUT_BF16();
  auto batches = randomBatches(5, 96, 3);
  auto one = trainOn("lenet", bf16Options(1, 96), batches);
  auto two = trainOn("lenet", bf16Options(2, 96), batches);
  ASSERT_TRUE(one && two);
  expectNear(snapshot(*one), snapshot(*two), kBf16Tolerance);
}

TEST(MixedPrecision, Resnet18OnOneAndTwoDevicesEndsWithTheSameParameters) {
  TANDEM_SKIP_WITHOUT_BF16();
  // Fused batch norm with bf16 activations and f32 statistics, channel-blocked where the
  // CPU has AVX-512.
  auto batches = randomBatches(2, 16, 4);
  auto one = trainOn("resnet18", bf16Options(1, 16), batches);
  auto two = trainOn("resnet18", bf16Options(2, 16), batches);
  ASSERT_TRUE(one && two);
  expectNear(snapshot(*one), snapshot(*two), kBf16Tolerance);
}

TEST(MixedPrecision, ReplicasStayBitIdentical) {
  TANDEM_SKIP_WITHOUT_BF16();
  auto batches = randomBatches(3, 96, 5);
  auto two = trainOn("lenet", bf16Options(2, 96), batches);
  ASSERT_TRUE(two);
  for (const auto& [name, replicas] : snapshot(*two))
    EXPECT_EQ(std::memcmp(replicas[1].data(), replicas[0].data(), replicas[0].size() * 4), 0)
        << name;
}

TEST(MixedPrecision, StaysNearTheF32Run) {
  TANDEM_SKIP_WITHOUT_BF16();
  auto batches = randomBatches(5, 96, 6);
  TrainSetup f32 = bf16Options(2, 96);
  f32.bf16 = false;
  auto ref = trainOn("lenet", f32, batches);
  auto low = trainOn("lenet", bf16Options(2, 96), batches);
  ASSERT_TRUE(ref && low);
  const Snapshot a = snapshot(*ref), b = snapshot(*low);
  expectNear(a, b, 5e-2);
  // ... and is not the f32 run itself: the pass did change the arithmetic.
  double largest = 0;
  for (const auto& [name, replicas] : a)
    largest = std::max(largest, relativeDifference(b.at(name)[0], replicas[0]));
  EXPECT_GT(largest, 1e-5);
}

TEST(MixedPrecision, Bf16AllReduceStaysNearTheF32AllReduce) {
  TANDEM_SKIP_WITHOUT_BF16();
  auto batches = randomBatches(5, 96, 7);
  TrainSetup wire = bf16Options(2, 96);
  wire.bf16_allreduce = true;
  auto ref = trainOn("lenet", bf16Options(2, 96), batches);
  auto low = trainOn("lenet", wire, batches);
  ASSERT_TRUE(ref && low);
  expectNear(snapshot(*ref), snapshot(*low), kBf16Tolerance);
}

TEST(MixedPrecision, UnfusedStaysNearFused) {
  TANDEM_SKIP_WITHOUT_BF16();
  auto batches = randomBatches(2, 16, 8);
  TrainSetup unfused = bf16Options(2, 16);
  unfused.fuse = false;
  auto fused = trainOn("resnet18", bf16Options(2, 16), batches);
  auto plain = trainOn("resnet18", unfused, batches);
  ASSERT_TRUE(fused && plain);
  expectNear(snapshot(*fused), snapshot(*plain), kBf16Tolerance);
}

}  // namespace
}  // namespace tandem::testing
