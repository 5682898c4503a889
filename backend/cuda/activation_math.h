#pragma once

// Per-element math of the activation family's own kernels (activation.cu): gelu in its
// erf and tanh forms, tanh and sigmoid, forward and backward, compiled for the GPU and by
// the host tests (tests/cuda/transformer_math_test.cc), which check it against the CPU
// cores (backend/cpu/activation_core.h: oneDNN's eltwise primitives). The two sides
// evaluate erf, tanh and exp with different approximations (CUDA's libdevice, oneDNN's
// jit polynomials), so they agree to a few ulps, not to the bit. Everything in float; bf16
// operands are widened exactly and results rounded once when stored (host_device.h).
// Backward conventions as on the CPU: gelu's reads x, tanh's and sigmoid's read y.

#include <cmath>

#include "backend/cuda/host_device.h"
#include "backend/dropout_mask.h"

namespace tandem::backend::cuda {

/// 1/sqrt(2) and sqrt(2/pi), rounded to float.
inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1/sqrt(2 pi)
inline constexpr float kGeluTanhCubic = 0.044715f;

/// x/2 (1 + erf(x / sqrt 2)).
TANDEM_HD float geluErf(float x) { return 0.5f * x * (1.0f + ::erff(x * kInvSqrt2)); }

/// d/dx of geluErf: Phi(x) + x phi(x).
TANDEM_HD float geluErfGrad(float dy, float x) {
  const float cdf = 0.5f * (1.0f + ::erff(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * ::expf(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}

/// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
TANDEM_HD float geluTanh(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
  return 0.5f * x * (1.0f + ::tanhf(inner));
}

/// d/dx of geluTanh: (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
TANDEM_HD float geluTanhGrad(float dy, float x) {
  const float inner = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
  const float t = ::tanhf(inner);
  const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * x * x);
  return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner);
}

TANDEM_HD float tanhValue(float x) { return ::tanhf(x); }

/// dy (1 - y^2), from tanh's output.
TANDEM_HD float tanhGradFromY(float dy, float y) { return dy * (1.0f - y * y); }

/// 1 / (1 + exp(-x)).
TANDEM_HD float sigmoidValue(float x) { return 1.0f / (1.0f + ::expf(-x)); }

/// dy y (1 - y), from sigmoid's output.
TANDEM_HD float sigmoidGradFromY(float dy, float y) { return dy * y * (1.0f - y); }

/// Dropout of one group of four elements: group g of sample r of a device's slice
/// [samples, per_sample] whose first sample is `first_sample` of the global batch; one
/// Philox call gives the group's four words (backend/dropout_mask.h), as in the CPU's
/// loop, so both backends drop the same elements and scale them alike. y may be x.
template <typename T>
TANDEM_HD void dropoutGroup(const DropoutMask& mask, int64_t first_sample, int64_t per_sample,
                            int64_t r, int64_t g, const T* x, T* y) {
  const Philox4x32Block b =
      mask.block(static_cast<uint64_t>(first_sample + r), static_cast<uint64_t>(g));
  const uint32_t words[4] = {b.x0, b.x1, b.x2, b.x3};
  const int64_t base = r * per_sample, first = 4 * g;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int j = 0; j < 4; ++j) {
    // Unrolled, so words[j] is a register, not local memory.
    if (first + j < per_sample)
      store(y, base + first + j, mask.apply(load(x, base + first + j), mask.keeps(words[j])));
  }
}

/// Thread t of dropout's kernel over a device's [rows, per_row] slice (groups = ceil(per_row
/// / 4) a row): group t % groups of row t / groups, with the mask at the step `step` points
/// to (device memory: @step's replica).
template <typename T>
TANDEM_HD void dropoutThread(const DropoutMask& mask, const int32_t* step, int64_t first_row,
                             int64_t per_row, int64_t groups, int64_t t, const T* x, T* y) {
  dropoutGroup(mask.atStep(step), first_row, per_row, t / groups, t % groups, x, y);
}

}  // namespace tandem::backend::cuda
