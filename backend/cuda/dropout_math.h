#pragma once

// Per-thread math of dropout's own kernel (dropout.cu), compiled for the GPU and by the
// host tests, which check it bit for bit against the CPU's loop (backend/dropout_mask.h:
// one Philox call per group of eight elements on both backends). bf16 operands are
// widened exactly and results rounded once when stored (host_device.h).

#include <cstdint>

#include "backend/cuda/host_device.h"
#include "backend/dropout_mask.h"

namespace tandem::backend::cuda {

/// Dropout of one group of eight elements: group g of sample r of a device's slice
/// [samples, per_sample] whose first sample is `first_sample` of the global batch; one
/// Philox call gives the group's eight 16-bit draws (backend/dropout_mask.h), as in the
/// CPU's loop, so both backends drop the same elements and scale them alike. y may be x.
template <typename T>
TANDEM_HD void dropoutGroup(const DropoutMask& mask, int64_t first_sample, int64_t per_sample,
                            int64_t r, int64_t g, const T* x, T* y) {
  const Philox4x32Block b =
      mask.block(static_cast<uint64_t>(first_sample + r), static_cast<uint64_t>(g));
  const int64_t base = r * per_sample, first = DropoutMask::kPerBlock * g;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int j = 0; j < DropoutMask::kPerBlock; ++j) {
    // Unrolled, so each draw is a register, not local memory.
    if (first + j < per_sample)
      store(y, base + first + j,
            mask.apply(load(x, base + first + j),
                       mask.keeps(DropoutMask::draw(b, static_cast<unsigned>(j)))));
  }
}

/// Thread t of dropout's kernel over a device's [rows, per_row] slice (groups = ceil(per_row
/// / 8) a row): group t % groups of row t / groups, with the mask at the step `step` points
/// to (device memory: @step's replica).
template <typename T>
TANDEM_HD void dropoutThread(const DropoutMask& mask, const int32_t* step, int64_t first_row,
                             int64_t per_row, int64_t groups, int64_t t, const T* x, T* y) {
  dropoutGroup(mask.atStep(step), first_row, per_row, t / groups, t % groups, x, y);
}

}  // namespace tandem::backend::cuda
