#pragma once

// The `purpose` words of ExampleKey::bits/below, one per kind of random choice a source or
// a transform makes, so that two choices about one example never share their bits. Listed
// in one place so that no two collide.

#include <cstdint>

namespace tandem::runtime::data {

inline constexpr uint64_t kTokenWindowDraw = 0x746f6b656e77696eull;  // "tokenwin"
inline constexpr uint64_t kCropDraw = 0x63726f7064726177ull;         // "cropdraw"
inline constexpr uint64_t kFlipDraw = 0x666c697064726177ull;         // "flipdraw"

}  // namespace tandem::runtime::data
