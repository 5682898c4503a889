#pragma once

// Dropout masks that do not depend on how the batch is split over devices. Whether
// element e of sample s is kept in step t is a pure function of (seed, t, s, e) and of
// which dropout of the model it is (its stream): Philox4x32-10 (philox.h) keyed by the
// run's seed, at the counter (e / 8, s, t, stream), 16-bit half (e % 8) of the result's
// four words (word (e % 8) / 2, its low half for even e). `s` is the sample's index in the
// GLOBAL batch, so a device holding samples [a, b) computes exactly rows a..b-1 of the
// mask the whole batch would get on one device: 1, 2 or 3 devices, an even or uneven
// split, give the same masks and so the same figures. (PyTorch and JAX draw from a
// per-device generator state, so their masks change with the split.)
//
// Kept when the 16-bit draw is at least threshold = round(p * 2^16): P(kept) = 1 - p to
// within 2^-17. Sixteen bits, not a whole word, so that one Philox call decides eight
// elements: dropout was 11 % of the ViT's step, most of it the draws (issue 46;
// FlashAttention draws 8 bits an element). Kept values are scaled by 1 / (1 - p)
// (inverted dropout, as PyTorch's nn.Dropout), so evaluation needs no rescaling; p = 1
// drops everything and scales by 0.
//
// Every function is TANDEM_HD: the CPU loops (backend/cpu/dropout_core.h) and the CUDA
// kernels call the same code, so both backends draw the same masks bit for bit.

#include <cstdint>

#include "backend/host_device.h"
#include "backend/philox.h"

namespace tandem::backend {

/// One dropout's mask in one step. Make it with dropoutMask(); the limits: at most 2^32
/// samples in the global batch and 2^35 elements per sample (the counter's words).
struct DropoutMask {
  /// Elements one Philox call decides: its four 32-bit words, two 16-bit draws each.
  static constexpr int kPerBlock = 8;

  Philox4x32Key key;   // the run's seed
  uint32_t step;       // the training step (counter word 2)
  uint32_t stream;     // which dropout of the model (counter word 3)
  uint32_t threshold;  // a 16-bit draw below it drops its element; 2^16 drops all
  float scale;         // 1 / (1 - p) as float; 0 when p = 1

  /// The four words that decide elements 8g .. 8g+7 of sample `sample`.
  TANDEM_HD Philox4x32Block block(uint64_t sample, uint64_t group) const {
    return philox4x32<10>(
        {static_cast<uint32_t>(group), static_cast<uint32_t>(sample), step, stream}, key);
  }

  /// The 16-bit draw of element j (0 to 7) of a block: word j / 2, low half for even j.
  /// Selects, not an array indexed at run time (which a GPU keeps in local memory).
  TANDEM_HD static uint32_t draw(const Philox4x32Block& b, unsigned j) {
    const unsigned w = j >> 1;
    const uint32_t word = w == 0 ? b.x0 : w == 1 ? b.x1 : w == 2 ? b.x2 : b.x3;
    return (j & 1) ? word >> 16 : word & 0xFFFFu;
  }

  TANDEM_HD bool keeps(uint32_t draw) const { return draw >= threshold; }

  /// Whether element `element` of the global batch's sample `sample` is kept.
  TANDEM_HD bool kept(uint64_t sample, uint64_t element) const {
    return keeps(draw(block(sample, element >> 3), static_cast<unsigned>(element & 7)));
  }

  /// x as dropout passes it: x * scale where kept, else x * 0 (also the backward: dy in, dx
  /// out). PyTorch's x * noise: a dropped NaN or inf gives NaN, not 0.
  TANDEM_HD float apply(float x, bool kept) const { return x * (kept ? scale : 0.0f); }

  /// This mask at the step in `*step` (@step, the i32[1] the runtime writes before every
  /// update), read where the kernel runs: on a GPU in the kernel, so that a recorded step
  /// (a CUDA graph) replays with the step of the day, not the one it was recorded with.
  TANDEM_HD DropoutMask atStep(const int32_t* step_value) const {
    DropoutMask m = *this;
    m.step = static_cast<uint32_t>(*step_value);
    return m;
  }
};

/// The mask of dropout `stream` with drop probability p (0 <= p <= 1) in step `step`
/// of a run seeded with `seed`. The threshold and scale are computed in double and
/// rounded once, so every backend and device gets the same ones.
TANDEM_HD DropoutMask dropoutMask(uint64_t seed, uint64_t step, uint32_t stream, double p) {
  DropoutMask m;
  m.key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  m.step = static_cast<uint32_t>(step);
  m.stream = stream;
  // p * 2^16 rounded to the nearest draw; p = 1 gives 2^16, which no 16-bit draw reaches.
  const double t = p * 65536.0 + 0.5;
  m.threshold = p <= 0.0 ? 0 : p >= 1.0 ? (uint32_t{1} << 16) : static_cast<uint32_t>(t);
  m.scale = p >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - p));
  return m;
}

}  // namespace tandem::backend
