#pragma once

// The per-element math of compare, where, mod and mod_backward (ir/ops.td), compiled for
// the CPU kernels (backend/cpu/select_kernels.cc), the CUDA kernels (select.cu) and the
// host tests alike; operands reach it through broadcast_index.h's maps. In float, as
// PyTorch computes these ops on f32 tensors: its remainder, fmod and floor division are
// written out below the way ATen's CPU kernels write them, so the quotient that mod's
// gradient takes is the same number.

#include <cmath>
#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

/// What a compare or mod node computes, one code for both (ir::Comparison's order first).
enum class BinaryFn : int32_t { kEq = 0, kNe, kLt, kLe, kGt, kGe, kRemainder, kFmod };

/// Python's floor division of floats (ATen's div_floor): (a - fmod(a, b)) / b, one less
/// where fmod's sign differs from b's, then rounded to the nearest integer; a zero
/// quotient keeps the sign of a / b, and b = 0 gives a / b (inf or NaN).
TANDEM_HD float floorDivide(float a, float b) {
  if (b == 0.0f) return a / b;
  const float mod = fmodf(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
  if (div == 0.0f) return copysignf(0.0f, a / b);
  float floor_div = floorf(div);
  if (div - floor_div > 0.5f) floor_div += 1.0f;
  return floor_div;
}

/// compare's 1 or 0, or mod's remainder: fmod (the sign of a), or Python's % (the sign
/// of b: fmod plus b where the signs differ, as ATen's remainder).
TANDEM_HD float binaryValue(BinaryFn f, float a, float b) {
  switch (f) {
    case BinaryFn::kEq:
      return a == b ? 1.0f : 0.0f;
    case BinaryFn::kNe:
      return a != b ? 1.0f : 0.0f;
    case BinaryFn::kLt:
      return a < b ? 1.0f : 0.0f;
    case BinaryFn::kLe:
      return a <= b ? 1.0f : 0.0f;
    case BinaryFn::kGt:
      return a > b ? 1.0f : 0.0f;
    case BinaryFn::kGe:
      return a >= b ? 1.0f : 0.0f;
    case BinaryFn::kFmod:
      return fmodf(a, b);
    case BinaryFn::kRemainder:
      break;
  }
  float mod = fmodf(a, b);
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) mod += b;
  return mod;
}

/// where: a where cond is nonzero (NaN too), else b.
TANDEM_HD float whereValue(float cond, float a, float b) { return cond != 0.0f ? a : b; }

/// mod_backward: -dy * q, q = a / b rounded down (remainder) or toward zero (fmod), as
/// PyTorch's remainder and fmod backward give the divisor's gradient.
TANDEM_HD float modBackwardValue(float dy, float a, float b, bool fmod) {
  const float q = fmod ? truncf(a / b) : floorDivide(a, b);
  return -dy * q;
}

}  // namespace tandem::backend
