#pragma once

// An attention's sizes as every kernel of it reads them (the CPU core, the CUDA launch and
// the node they are read from, backend/attention_node.h): q [N, Tq, H*d], k [N, Tk, H*d],
// v [N, Tk, H*dv]. Plain data, no IR: the CPU core and nvcc include it alone.

#include <cstdint>

namespace tandem::backend {

struct AttentionSizes {
  int64_t batch = 0, heads = 0;
  int64_t queries = 0, keys = 0;  // Tq, Tk
  int64_t depth = 0;              // d of a head of q and k
  int64_t value_depth = 0;        // dv of a head of v and y
  float scale = 1;
  bool causal = false;
  /// Rows of k and v per batch row when they are a cache longer than the keys seen
  /// (attention_cached on CPU: keys 0..position of a cache of key_rows); 0: `keys`.
  int64_t key_rows = 0;
};

}  // namespace tandem::backend
