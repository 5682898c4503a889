#pragma once

// What both backends' attention kernels read from a node of attention, attention_backward
// or attention_cached: the heads' sizes (q [N, Tq, H*d], k [N, Tk, H*d], v [N, Tk, H*dv])
// and, with dropout, the mask's constants (the run's seed, mask_id, p, the device's first
// row; the step is @step's value, read where the kernel runs).

#include <cstdint>

#include "backend/attention_sizes.h"
#include "backend/dropout_mask.h"
#include "ir/op_views.h"

namespace tandem::backend {

/// The sizes (each backend's kernels take them as they are) and the dropout's constants.
struct AttentionNode : AttentionSizes {
  bool dropout = false;  // the node reads @step (p > 0)
  DropoutMask mask{};    // at step 0: a kernel takes @step's value when it runs
  int64_t first_sample = 0;
};

template <typename View>
AttentionNode attentionNodeOf(const View& v, uint64_t seed) {
  const ir::Shape &q = v.q()->type().shape, &k = v.k()->type().shape, &val = v.v()->type().shape;
  AttentionNode a;
  static_cast<AttentionSizes&>(a) = AttentionSizes{.batch = q[0],
                                                   .heads = v.heads(),
                                                   .queries = q[1],
                                                   .keys = k[1],
                                                   .depth = q[2] / v.heads(),
                                                   .value_depth = val[2] / v.heads(),
                                                   .scale = static_cast<float>(v.scale())};
  if constexpr (requires { v.causal(); }) a.causal = v.causal();
  if constexpr (requires { v.step(); }) {
    if (v.step() != nullptr) {
      a.dropout = true;
      a.mask = dropoutMask(seed, 0, static_cast<uint32_t>(v.mask_id()), v.p());
      a.first_sample = v.sample_offset();
    }
  }
  return a;
}

}  // namespace tandem::backend
