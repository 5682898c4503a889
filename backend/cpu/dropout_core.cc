#include "backend/cpu/dropout_core.h"

#include <algorithm>

#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

// Draws are made a chunk of a sample at a time into a buffer, then applied: the draw
// loop (ten rounds of 32x32->64-bit products over consecutive counters) vectorizes on
// its own, and the apply loop is a plain select.
constexpr int64_t kChunkGroups = 64;  // 512 draws: 1 KiB on the stack
constexpr int64_t kPerBlock = DropoutMask::kPerBlock;

// PyTorch's x * noise, noise = scale or 0 (DropoutMask::apply): a dropped NaN or inf is
// NaN and a dropped negative -0, where a select of 0 hid them.
template <typename T>
TANDEM_VECTOR_LOOPS void applyDraws(const uint16_t* draws, uint32_t threshold, float scale,
                                    const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * (draws[i] >= threshold ? scale : 0.0f);
  }
}

/// Calls `f(draws, offset, n)` for each chunk of each sample of the slice: draws of
/// elements [offset, offset + n) of the slice's flat tensor.
template <typename F>
void forEachChunk(const DropoutMask& mask, const DropoutSlice& s, F f) {
  uint16_t draws[kPerBlock * kChunkGroups];
  for (int64_t r = 0; r < s.samples; ++r) {
    const uint64_t sample = static_cast<uint64_t>(s.first_sample + r);
    for (int64_t e = 0; e < s.per_sample; e += kPerBlock * kChunkGroups) {
      const int64_t n = std::min(kPerBlock * kChunkGroups, s.per_sample - e);
      dropoutDraws(mask, sample, e / kPerBlock, (n + kPerBlock - 1) / kPerBlock, draws);
      f(draws, r * s.per_sample + e, n);
    }
  }
}

template <typename T>
void apply(const DropoutMask& mask, const DropoutSlice& s, const T* x, T* y) {
  forEachChunk(mask, s, [&](const uint16_t* draws, int64_t at, int64_t n) {
    applyDraws(draws, mask.threshold, mask.scale, x + at, y + at, n);
  });
}

}  // namespace

TANDEM_VECTOR_LOOPS void dropoutDraws(const DropoutMask& mask, uint64_t sample, int64_t first_group,
                                      int64_t groups, uint16_t* draws) {
  for (int64_t g = 0; g < groups; ++g) {
    const Philox4x32Block b = mask.block(sample, static_cast<uint64_t>(first_group + g));
    for (unsigned j = 0; j < kPerBlock; ++j)
      draws[kPerBlock * g + j] = static_cast<uint16_t>(DropoutMask::draw(b, j));
  }
}

void dropoutApply(const DropoutMask& mask, const DropoutSlice& slice, const float* x, float* y) {
  apply(mask, slice, x, y);
}

void dropoutApply(const DropoutMask& mask, const DropoutSlice& slice, const bf16* x, bf16* y) {
  apply(mask, slice, x, y);
}

void dropoutKeepMask(const DropoutMask& mask, const DropoutSlice& slice, uint8_t* keep) {
  forEachChunk(mask, slice, [&](const uint16_t* draws, int64_t at, int64_t n) {
    for (int64_t i = 0; i < n; ++i) keep[at + i] = mask.keeps(draws[i]) ? 1 : 0;
  });
}

}  // namespace tandem::backend::cpu
