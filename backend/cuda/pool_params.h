#pragma once

// The PoolParams (pool_math.h) of one pooling, from its shapes and window: host code (the
// kernels' factory and the tests), where pool_math.h itself is compiled for the device too.

#include "backend/cuda/pool_math.h"
#include "ir/attrs.h"
#include "ir/types.h"

namespace tandem::backend::cuda {

/// x [N,C,H,W] pooled into y [N,C,H',W'] by window `k`, `stride` and `pad` per axis.
inline PoolParams poolParams(const ir::Shape& x, const ir::Shape& y, ir::Hw k, ir::Hw stride,
                             ir::Hw pad) {
  return {.planes = x[0] * x[1],
          .h = x[2],
          .w = x[3],
          .oh = y[2],
          .ow = y[3],
          .kh = k.h,
          .kw = k.w,
          .stride_h = stride.h,
          .stride_w = stride.w,
          .pad_h = pad.h,
          .pad_w = pad.w};
}

}  // namespace tandem::backend::cuda
