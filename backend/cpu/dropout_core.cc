#include "backend/cpu/dropout_core.h"

#include <algorithm>

#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

// Words are drawn a chunk of a sample at a time into a buffer, then applied: the draw
// loop (ten rounds of 32x32->64-bit products over consecutive counters) vectorizes on
// its own, and the apply loop is a plain select.
constexpr int64_t kChunkGroups = 64;  // 256 words: 1 KiB on the stack

// PyTorch's x * noise, noise = scale or 0 (DropoutMask::apply): a dropped NaN or inf is
// NaN and a dropped negative -0, where a select of 0 hid them.
template <typename T>
TANDEM_VECTOR_LOOPS void applyWords(const uint32_t* words, uint64_t threshold, float scale,
                                    const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * (words[i] >= threshold ? scale : 0.0f);
  }
}

/// Calls `f(words, offset, n)` for each chunk of each sample of the slice: words of
/// elements [offset, offset + n) of the slice's flat tensor.
template <typename F>
void forEachChunk(const DropoutMask& mask, const DropoutSlice& s, F f) {
  uint32_t words[4 * kChunkGroups];
  for (int64_t r = 0; r < s.samples; ++r) {
    const uint64_t sample = static_cast<uint64_t>(s.first_sample + r);
    for (int64_t e = 0; e < s.per_sample; e += 4 * kChunkGroups) {
      const int64_t n = std::min(4 * kChunkGroups, s.per_sample - e);
      dropoutDrawWords(mask, sample, e / 4, (n + 3) / 4, words);
      f(words, r * s.per_sample + e, n);
    }
  }
}

template <typename T>
void apply(const DropoutMask& mask, const DropoutSlice& s, const T* x, T* y) {
  forEachChunk(mask, s, [&](const uint32_t* words, int64_t at, int64_t n) {
    applyWords(words, mask.threshold, mask.scale, x + at, y + at, n);
  });
}

}  // namespace

TANDEM_VECTOR_LOOPS void dropoutDrawWords(const DropoutMask& mask, uint64_t sample,
                                          int64_t first_group, int64_t groups, uint32_t* words) {
  for (int64_t g = 0; g < groups; ++g) {
    const Philox4x32Block b = mask.block(sample, static_cast<uint64_t>(first_group + g));
    words[4 * g] = b.x0;
    words[4 * g + 1] = b.x1;
    words[4 * g + 2] = b.x2;
    words[4 * g + 3] = b.x3;
  }
}

void dropoutApply(const DropoutMask& mask, const DropoutSlice& slice, const float* x, float* y) {
  apply(mask, slice, x, y);
}

void dropoutApply(const DropoutMask& mask, const DropoutSlice& slice, const bf16* x, bf16* y) {
  apply(mask, slice, x, y);
}

void dropoutKeepMask(const DropoutMask& mask, const DropoutSlice& slice, uint8_t* keep) {
  forEachChunk(mask, slice, [&](const uint32_t* words, int64_t at, int64_t n) {
    for (int64_t i = 0; i < n; ++i) keep[at + i] = mask.keeps(words[i]) ? 1 : 0;
  });
}

}  // namespace tandem::backend::cpu
