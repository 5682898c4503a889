#pragma once

// FNV-1a, 64-bit: the digest processes compare (settings, a collective's name, a compiled
// module) and tests compare (variables bit for bit). Not for security; chain calls by
// passing the previous digest as `h`.

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tandem::ir {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

inline uint64_t fnv1a(absl::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace tandem::ir
