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

TrainSetup f32Options(int devices, int64_t batch) {
  TrainSetup o = bf16Options(devices, batch);
  o.bf16 = false;
  return o;
}

/// Largest |a - b| over two tensors.
double maxAbsDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

/// Two bf16 runs that f32 arithmetic would make equal (another batch split, another
/// reduction dtype, fused or not) differ by where bf16 rounds, and batch norm turns every
/// flipped rounding into a gradient change of its own size. So the yardstick is bf16
/// itself: per trained parameter (every replica of `b`), `a` and `b` may differ by twice
/// what `a` differs from `f32`, the same run in f32 (two noisy runs against one), or by
/// 1e-3 (the biases before batch norm, whose true gradient is zero and whose values are
/// rounding noise around 1e-4). Momentum buffers, running sums of gradients, are left out.
void expectWithinBf16Noise(runtime::Trainer& a, runtime::Trainer& b, runtime::Trainer& f32) {
  const Snapshot sa = snapshot(a), sb = snapshot(b), sf = snapshot(f32);
  for (const ir::Var& v : a.executor().module().vars()) {
    if (v.role != ir::VarRole::kParam) continue;
    const double noise = maxAbsDifference(sa.at(v.name)[0], sf.at(v.name)[0]);
    for (const auto& replica : sb.at(v.name))
      EXPECT_LE(maxAbsDifference(replica, sa.at(v.name)[0]), std::max(2 * noise, 1e-3)) << v.name;
  }
}

/// Trains `model` on `batches` as `a`, as `b` and as `f32` (the f32 run `a` approximates)
/// and expects a and b within bf16's noise of each other.
void expectSameUpToBf16Noise(const char* model, const std::vector<OwnedBatch>& batches,
                             const TrainSetup& a, const TrainSetup& b, const TrainSetup& f32) {
  auto ta = trainOn(model, a, batches), tb = trainOn(model, b, batches),
       tf = trainOn(model, f32, batches);
  ASSERT_TRUE(ta && tb && tf);
  expectWithinBf16Noise(*ta, *tb, *tf);
}

TEST(MixedPrecision, LenetOnOneAndTwoDevicesDifferNoMoreThanBf16FromF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  expectSameUpToBf16Noise("lenet", randomBatches(5, 96, 3), bf16Options(1, 96),
                          bf16Options(2, 96), f32Options(1, 96));
}

TEST(MixedPrecision, Resnet18OnOneAndTwoDevicesDifferNoMoreThanBf16FromF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  // Fused batch norm with bf16 activations and f32 statistics, channel-blocked where the
  // CPU has AVX-512; sync batch norm, or per-device statistics would make 1 and 2 devices
  // different models.
  TrainSetup two_devices = bf16Options(2, 16);
  two_devices.sync_bn = true;
  expectSameUpToBf16Noise("resnet18", randomBatches(2, 16, 4), bf16Options(1, 16),
                          two_devices, f32Options(1, 16));
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
  auto ref = trainOn("lenet", f32Options(2, 96), batches);
  auto low = trainOn("lenet", bf16Options(2, 96), batches);
  ASSERT_TRUE(ref && low);
  const Snapshot a = snapshot(*ref), b = snapshot(*low);
  double largest = 0;
  for (const ir::Var& v : ref->executor().module().vars()) {
    if (v.role != ir::VarRole::kParam) continue;
    const double d = relativeDifference(b.at(v.name)[0], a.at(v.name)[0]);
    // Within 5% of each parameter's scale (1e-3 for the small biases).
    double scale = 0;
    for (float x : a.at(v.name)[0]) scale = std::max(scale, double(std::abs(x)));
    EXPECT_LE(maxAbsDifference(b.at(v.name)[0], a.at(v.name)[0]), std::max(5e-2 * scale, 1e-3))
        << v.name;
    largest = std::max(largest, d);
  }
  // ... and is not the f32 run itself: the pass did change the arithmetic.
  EXPECT_GT(largest, 1e-5);
}

TEST(MixedPrecision, Bf16AllReduceDiffersNoMoreThanBf16FromF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  TrainSetup wire = bf16Options(2, 96);
  wire.bf16_allreduce = true;
  expectSameUpToBf16Noise("lenet", randomBatches(5, 96, 7), bf16Options(2, 96), wire,
                          f32Options(2, 96));
}

TEST(MixedPrecision, UnfusedDiffersNoMoreThanBf16FromF32) {
  TANDEM_SKIP_WITHOUT_BF16();
  TrainSetup unfused = bf16Options(2, 16);
  unfused.fuse = false;
  expectSameUpToBf16Noise("resnet18", randomBatches(2, 16, 8), bf16Options(2, 16), unfused,
                          f32Options(2, 16));
}

}  // namespace
}  // namespace tandem::testing
