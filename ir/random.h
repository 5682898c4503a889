#pragma once

#include <cstdint>

namespace tandem::ir {

/// Sebastiano Vigna's splitmix64 finaliser: spreads nearby seeds (0, 1, 2, ...) apart.
/// The values `initialize` draws and the order the data loader shuffles into are defined
/// by it (the same on every platform, which std::hash and the std distributions do not
/// promise), so it lives with the IR that both depend on.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace tandem::ir
