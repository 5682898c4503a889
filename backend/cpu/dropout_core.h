#pragma once

// Dropout on a device's slice of the batch, with masks that do not depend on the split
// (backend/dropout_mask.h): the device's tensor is [samples, per_sample] and its first
// sample is sample `first_sample` of the global batch. The backward pass draws the same
// mask again from the same counters instead of keeping it (Philox costs less than a
// mask's memory traffic would, and nothing is stored between the passes).
//
// Loops of our own (oneDNN has no random ops): x and y f32 or bf16, float arithmetic.

#include <cstdint>

#include "backend/bf16.h"
#include "backend/dropout_mask.h"

namespace tandem::backend::cpu {

/// Where a device's rows sit in the global batch.
struct DropoutSlice {
  int64_t first_sample = 0;  // index in the global batch of the slice's first sample
  int64_t samples = 0;       // the slice's samples (rows)
  int64_t per_sample = 0;    // elements per sample
};

/// y = x * mask * scale (also the backward: dy in, dx out). y may be x.
void dropoutApply(const DropoutMask& mask, const DropoutSlice& slice, const float* x, float* y);
void dropoutApply(const DropoutMask& mask, const DropoutSlice& slice, const bf16* x, bf16* y);

/// The 16-bit draws that decide elements 8 * first_group .. 8 * (first_group + groups) - 1
/// of sample `sample` (8 * groups of them, DropoutMask::draw's order): a vectorized draw
/// for kernels that apply a mask their own way (attention's probabilities).
void dropoutDraws(const DropoutMask& mask, uint64_t sample, int64_t first_group, int64_t groups,
                  uint16_t* draws);

/// The mask itself, 1 where kept (tests and debugging).
void dropoutKeepMask(const DropoutMask& mask, const DropoutSlice& slice, uint8_t* keep);

}  // namespace tandem::backend::cpu
