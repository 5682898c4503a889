// Dropout's CPU core: the masks do not depend on how the batch is split over devices,
// the values are x * scale or 0 exactly, bf16 rounds once, and the backward pass draws
// the forward's mask again.

#include "backend/cpu/dropout_core.h"

#include <cstdint>
#include <random>
#include <vector>

#include "backend/bf16.h"
#include "gtest/gtest.h"

namespace tandem::backend::cpu {
namespace {

std::vector<float> randomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// A batch of 10 samples of 7 x 43 values (per sample 301: not a multiple of 4, and more
// than one 256-word chunk), as one device and as uneven slices with their offsets.
constexpr int64_t kSamples = 10, kPerSample = 7 * 43;

TEST(DropoutCore, SlicesOfTheBatchGetTheRowsOfTheWholeBatchsMask) {
  const DropoutMask mask = dropoutMask(/*seed=*/2024, /*step=*/17, /*stream=*/3, 0.3);
  const std::vector<float> x = randomValues(kSamples * kPerSample, 1);
  std::vector<float> whole(x.size()), split(x.size(), -1.0f);
  dropoutApply(mask, {0, kSamples, kPerSample}, x.data(), whole.data());
  std::vector<uint8_t> keep_whole(x.size()), keep_split(x.size(), 2);
  dropoutKeepMask(mask, {0, kSamples, kPerSample}, keep_whole.data());
  // 1, 2 and 3 devices, even and uneven: every split must give the same bits.
  for (const std::vector<int64_t>& sizes :
       std::vector<std::vector<int64_t>>{{10}, {5, 5}, {4, 3, 3}, {7, 3}, {1, 8, 1}, {3, 1, 6}}) {
    int64_t first = 0;
    for (int64_t n : sizes) {
      const int64_t at = first * kPerSample;
      dropoutApply(mask, {first, n, kPerSample}, x.data() + at, split.data() + at);
      dropoutKeepMask(mask, {first, n, kPerSample}, keep_split.data() + at);
      first += n;
    }
    ASSERT_EQ(first, kSamples);
    EXPECT_EQ(split, whole) << "split of " << sizes.size() << " slices";
    EXPECT_EQ(keep_split, keep_whole) << "split of " << sizes.size() << " slices";
  }
}

TEST(DropoutCore, KeptValuesAreScaledAndTheRestAreZero) {
  const DropoutMask mask = dropoutMask(5, 2, 1, 0.25);
  const std::vector<float> x = randomValues(kSamples * kPerSample, 2);
  std::vector<float> y(x.size());
  std::vector<uint8_t> keep(x.size());
  dropoutApply(mask, {4, kSamples, kPerSample}, x.data(), y.data());
  dropoutKeepMask(mask, {4, kSamples, kPerSample}, keep.data());
  int64_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t sample = 4 + int64_t(i) / kPerSample, element = int64_t(i) % kPerSample;
    ASSERT_EQ(keep[i] != 0, mask.kept(uint64_t(sample), uint64_t(element))) << i;
    EXPECT_EQ(y[i], keep[i] ? x[i] * mask.scale : 0.0f) << i;
    kept += keep[i];
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, int64_t(x.size()));
}

TEST(DropoutCore, BackwardDrawsTheForwardsMaskAgain) {
  // dx = dropout(dy) with the same counters: zero exactly where y is, scaled alike.
  const DropoutMask mask = dropoutMask(77, 9, 4, 0.5);
  const std::vector<float> x = randomValues(kSamples * kPerSample, 3);
  const std::vector<float> dy = randomValues(kSamples * kPerSample, 4);
  std::vector<float> y(x.size()), dx(x.size());
  dropoutApply(mask, {2, kSamples, kPerSample}, x.data(), y.data());
  dropoutApply(mask, {2, kSamples, kPerSample}, dy.data(), dx.data());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i] == 0.0f, dx[i] == 0.0f) << i;
    if (y[i] != 0.0f) {
      EXPECT_EQ(dx[i], dy[i] * mask.scale) << i;
    }
  }
}

TEST(DropoutCore, Bf16RoundsTheScaledValueOnceAndInPlaceWorks) {
  const DropoutMask mask = dropoutMask(3, 1, 0, 0.1);
  const std::vector<float> v = randomValues(kSamples * kPerSample, 5);
  std::vector<bf16> x(v.begin(), v.end()), y(v.size());
  std::vector<float> f32(v.size()), xf(v.size());
  for (size_t i = 0; i < v.size(); ++i) xf[i] = x[i];
  dropoutApply(mask, {0, kSamples, kPerSample}, x.data(), y.data());
  dropoutApply(mask, {0, kSamples, kPerSample}, xf.data(), f32.data());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(y[i].bits, bf16(f32[i]).bits) << i;
  dropoutApply(mask, {0, kSamples, kPerSample}, x.data(), x.data());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(x[i].bits, y[i].bits) << i;
}

}  // namespace
}  // namespace tandem::backend::cpu
