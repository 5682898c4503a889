#pragma once

// Per-element math of the elementwise family's own kernels (elementwise.cu): compiled for
// the GPU and by the host tests, which check it against the CPU kernels bit for bit. Every
// function computes in float (bf16 operands widened exactly, a bf16 result rounded once
// where it is stored: host_device.h), as backend/cpu/elementwise_kernels.cc and
// backend/cpu/pool_kernels.cc do. The unary ops' math (relu, ...), which the CPU backend
// shares, is backend/unary_math.h.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

/// add in float (bf16: rounded once, when stored), as the CPU's loop and oneDNN do.
TANDEM_HD float addValue(float a, float b) { return a + b; }

/// add on i32: two's complement wrap-around, where the CPU's signed overflow is undefined.
TANDEM_HD int32_t addValue(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

/// global_avg_pool's factor 1/HW, in float as the CPU computes it.
TANDEM_HD float globalPoolScale(int64_t hw) { return 1.0f / static_cast<float>(hw); }

/// global_avg_pool of one H x W plane `p` (hw values): summed in float in index order,
/// then scaled, exactly the CPU's loop (one GPU thread per plane). `step`: elements
/// between neighbouring pixels, 1 in NCHW, C in NHWC (plane p is image p / C, channel
/// p % C): the same values in the same order, so the same bits.
template <typename T>
TANDEM_HD float planeMean(const T* x, int64_t p, int64_t hw, float scale, int64_t step = 1) {
  const T* plane = x + p / step * hw * step + p % step;
  float sum = 0.0f;
  for (int64_t i = 0; i < hw; ++i) sum += load(plane, i * step);
  return sum * scale;
}

/// global_avg_pool_backward at element i of dx (in NCHW, or NHWC with step = C): dy of
/// its plane, scaled.
template <typename T>
TANDEM_HD float globalPoolGrad(const T* dy, int64_t i, int64_t hw, float scale, int64_t step = 1) {
  return load(dy, i / step / hw * step + i % step) * scale;
}

}  // namespace tandem::backend::cuda
