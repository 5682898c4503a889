// Philox4x32 against Random123's published known-answer vectors, and the dropout mask
// (backend/dropout_mask.h) as a function of (seed, step, global sample, element, stream).

#include "backend/philox.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/dropout_core.h"
#include "backend/dropout_mask.h"
#include "gtest/gtest.h"

namespace tandem::backend {
namespace {

struct Kat {
  Philox4x32Block counter;
  Philox4x32Key key;
  Philox4x32Block expected;
};

// Random123's tests/kat_vectors (github.com/DEShawResearch/random123, commit 9545ff6,
// lines 24-29: "philox4x32 R ctr0 ctr1 ctr2 ctr3 key0 key1 expected0..3"), the vectors
// that Salmon et al. publish with the generator.
const Kat kKat7[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
};
const Kat kKat10[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

void expectBlock(const Philox4x32Block& got, const Philox4x32Block& want) {
  EXPECT_EQ(got.x0, want.x0);
  EXPECT_EQ(got.x1, want.x1);
  EXPECT_EQ(got.x2, want.x2);
  EXPECT_EQ(got.x3, want.x3);
}

TEST(Philox, TenRoundsMatchRandom123KnownAnswers) {
  for (const Kat& k : kKat10) expectBlock(philox4x32<10>(k.counter, k.key), k.expected);
}

TEST(Philox, SevenRoundsMatchRandom123KnownAnswers) {
  for (const Kat& k : kKat7) expectBlock(philox4x32<7>(k.counter, k.key), k.expected);
}

TEST(DropoutMask, KeepsOneMinusPOfTheElementsAndScalesThem) {
  for (double p : {0.1, 0.5, 0.9}) {
    const DropoutMask m = dropoutMask(/*seed=*/42, /*step=*/3, /*stream=*/7, p);
    EXPECT_FLOAT_EQ(m.scale, static_cast<float>(1.0 / (1.0 - p)));
    int64_t kept = 0;
    const int64_t samples = 64, per = 4099;
    for (int64_t s = 0; s < samples; ++s)
      for (int64_t e = 0; e < per; ++e) kept += m.kept(s, e) ? 1 : 0;
    const double n = double(samples * per), rate = kept / n;
    // Binomial: 5 standard deviations of the kept fraction (about 0.01 at p = 0.5); a
    // generator that ignored the threshold or an element's draw would miss by far more.
    // The threshold's 16 bits move P(kept) by at most 2^-17, far inside that.
    EXPECT_NEAR(rate, 1.0 - p, 5 * std::sqrt(p * (1 - p) / n)) << "p " << p;
  }
}

TEST(DropoutMask, ZeroKeepsAllAndOneDropsAll) {
  const DropoutMask none = dropoutMask(1, 0, 0, 0.0), all = dropoutMask(1, 0, 0, 1.0);
  EXPECT_EQ(none.scale, 1.0f);
  EXPECT_EQ(all.scale, 0.0f);
  for (int64_t e = 0; e < 1000; ++e) {
    EXPECT_TRUE(none.kept(5, e));
    EXPECT_FALSE(all.kept(5, e));
  }
}

/// The fraction of elements on which two masks agree about keeping.
double agreement(const DropoutMask& a, const DropoutMask& b, int64_t sa, int64_t sb) {
  int64_t same = 0;
  const int64_t n = 20000;
  for (int64_t e = 0; e < n; ++e) same += a.kept(sa, e) == b.kept(sb, e) ? 1 : 0;
  return double(same) / n;
}

TEST(DropoutMask, SeedStepStreamAndSampleEachChangeTheMask) {
  // Independent masks at p = 0.5 agree on half the elements; the same mask on all.
  const DropoutMask base = dropoutMask(42, 3, 7, 0.5);
  EXPECT_EQ(agreement(base, base, 2, 2), 1.0);
  EXPECT_NEAR(agreement(base, dropoutMask(43, 3, 7, 0.5), 2, 2), 0.5, 0.02);
  EXPECT_NEAR(agreement(base, dropoutMask(42ull | (1ull << 40), 3, 7, 0.5), 2, 2), 0.5, 0.02);
  EXPECT_NEAR(agreement(base, dropoutMask(42, 4, 7, 0.5), 2, 2), 0.5, 0.02);
  EXPECT_NEAR(agreement(base, dropoutMask(42, 3, 8, 0.5), 2, 2), 0.5, 0.02);
  EXPECT_NEAR(agreement(base, base, 2, 3), 0.5, 0.02);
}

TEST(DropoutMask, ElementsEightGOnAreTheHalvesOfGroupGsWords) {
  const DropoutMask m = dropoutMask(9, 1, 2, 0.5);
  for (uint64_t g : {0ull, 1ull, 1000ull}) {
    const Philox4x32Block b = m.block(11, g);
    const uint32_t words[4] = {b.x0, b.x1, b.x2, b.x3};
    for (unsigned w = 0; w < 4; ++w) {
      // Element 8g + 2w is word w's low half, 8g + 2w + 1 its high half.
      EXPECT_EQ(m.kept(11, 8 * g + 2 * w), m.keeps(words[w] & 0xFFFFu));
      EXPECT_EQ(m.kept(11, 8 * g + 2 * w + 1), m.keeps(words[w] >> 16));
    }
    // The counter is (group, sample, step, stream) under the seed's two words.
    const Philox4x32Block direct = philox4x32<10>({uint32_t(g), 11, 1, 2}, {9, 0});
    EXPECT_EQ(b.x0, direct.x0);
    EXPECT_EQ(b.x3, direct.x3);
  }
}

}  // namespace
}  // namespace tandem::backend
