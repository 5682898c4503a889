#include "backend/cpu/finite_scan.h"

#include <bit>
#include <cstdint>

#include "backend/bf16.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

// A value is NaN or infinite when its magnitude's bits (the sign masked off) are at least
// the infinity's. The largest magnitude of the tensor is an unsigned max reduction, two
// integer instructions per vector and no branch, so the loop runs at the speed memory
// delivers the tensor (70 us for attention's 5 MB of scores, bench/transformer_cores_bench).
TANDEM_VECTOR_LOOPS bool finite(const float* x, int64_t n) {
  uint32_t largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t m = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    largest = m > largest ? m : largest;
  }
  return largest < 0x7f800000u;
}

TANDEM_VECTOR_LOOPS bool finite(const bf16* x, int64_t n) {
  uint16_t largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t m = x[i].bits & 0x7fffu;
    largest = m > largest ? m : largest;
  }
  return largest < 0x7f80u;
}

}  // namespace

bool allFinite(const float* x, int64_t n) { return finite(x, n); }
bool allFinite(const bf16* x, int64_t n) { return finite(x, n); }

bool allFinite(const TensorView& t) {
  switch (t.type.dtype) {
    case ir::DType::kF32:
      return allFinite(t.as<float>(), t.numElements());
    case ir::DType::kBF16:
      return allFinite(t.as<bf16>(), t.numElements());
    default:
      return true;
  }
}

}  // namespace tandem::backend::cpu
