#pragma once

// A layer the zoo's transformers share (vit.cc, gpt.cc).

#include <cstdint>
#include <optional>

#include "frontend/builder.h"

namespace tandem::zoo {

/// A linear layer over the last axis of [N, T, D]: the matrix product takes rows, so the
/// tokens of every sequence are rows of one [N*T, D] matrix (the batch axis stays -1:
/// replicate re-infers each device's share). `init`: the weight's initializer (unset: the
/// build's).
inline Tensor tokenLinear(Builder& b, Tensor x, int64_t tokens, int64_t out, const char* name,
                          std::optional<ir::Initializer> init = std::nullopt) {
  const int64_t in = x.shape().back();
  Tensor rows = b.reshape(x, {-1, in});
  Tensor y = b.linear(rows, {.out_features = out, .init = init, .name = name});
  return b.reshape(y, {-1, tokens, out});
}

}  // namespace tandem::zoo
