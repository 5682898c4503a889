#pragma once

// bfloat16 for the CPU kernels' own loops (oneDNN primitives take bf16 themselves). A
// library type would do (oneDNN keeps one, but internal; C++23's std::bfloat16_t is not
// in GCC 12): this is the upper half of an f32, read exactly as float and written rounded
// to nearest even, as oneDNN's reorders and bf16 kernels round, so own loops and
// primitives agree. Loops templated on their element type T (float or bf16) compute in
// float either way: `float v = x[i]` widens, `y[i] = v` rounds.

#include <bit>
#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/types.h"

namespace tandem::backend {

struct bf16 {
  uint16_t bits;

  bf16() = default;
  constexpr bf16(float f) : bits(round(f)) {}  // NOLINT: implicit, as a float store
  constexpr operator float() const {           // NOLINT: implicit, as a float load
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
  }

  /// f32 -> bf16, round to nearest even; a NaN stays a (quiet) NaN. Written as one
  /// 32-bit select with a signed compare so that loops over it vectorize on plain SSE2
  /// (an unsigned compare or a select on the 16-bit result cost 15% more there).
  static constexpr uint16_t round(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const bool nan = static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000;
    const uint32_t r = nan ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(r >> 16);
  }
};
static_assert(sizeof(bf16) == 2);

/// Calls `f` with a value of the element type of an f32 or bf16 tensor (float or bf16),
/// for factories that instantiate a loop template per dtype:
///   withFloatType(t, [&](auto tag) { using T = decltype(tag); ... });
template <typename F>
auto withFloatType(ir::DType t, F f) {
  return t == ir::DType::kBF16 ? f(bf16{}) : f(float{});
}

}  // namespace tandem::backend
