#include "runtime/data/example_source.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/random.h"

namespace tandem::runtime::data {

int64_t Field::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Field::text() const {
  return absl::StrCat(name, ": ", ir::dtypeName(dtype), "[", absl::StrJoin(shape, ","), "]");
}

uint64_t ExampleKey::bits(uint64_t purpose, uint64_t n) const {
  // Each word goes through the finaliser before the next is mixed in, so that nearby keys
  // (positions 0, 1, 2 ...) give unrelated bits.
  uint64_t h = ir::splitmix64(seed);
  for (uint64_t word : {static_cast<uint64_t>(epoch), static_cast<uint64_t>(position), purpose, n})
    h = ir::splitmix64(h ^ word);
  return h;
}

uint64_t ExampleKey::below(uint64_t bound, uint64_t purpose, uint64_t n) const {
  // The first draw not below 2^64 mod bound, reduced mod bound: exactly uniform.
  const uint64_t reject_below = (0 - bound) % bound;
  for (uint64_t k = 0;; ++k) {
    const uint64_t r = bits(purpose, n * 0x9e3779b97f4a7c15ull + k);
    if (r >= reject_below) return r % bound;
  }
}

}  // namespace tandem::runtime::data
