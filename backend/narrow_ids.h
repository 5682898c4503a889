#pragma once

// i64 ids and labels to i32 (cast of a model's i64 input), per element, shared by the CPU
// loop and the CUDA kernel (TANDEM_HD). Saturating: the runtime checks the values an index
// op reads as each batch is handed over (runtime/label_check.h), and a value past i32
// stays out of every index range rather than wrapping into one.

#include <cstdint>

#include "backend/host_device.h"

namespace tandem::backend {

TANDEM_HD int32_t narrowId(int64_t v) {
  constexpr int64_t kLo = -2147483647 - 1, kHi = 2147483647;
  return static_cast<int32_t>(v < kLo ? kLo : v > kHi ? kHi : v);
}

}  // namespace tandem::backend
