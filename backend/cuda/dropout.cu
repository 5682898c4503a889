// dropout's own kernel: one thread per group of eight elements (one Philox call), over a
// grid-stride loop (elementwise_map.cuh). Math in dropout_math.h, as the host tests check
// it.

#include "backend/cuda/dropout_launch.h"
#include "backend/cuda/dropout_math.h"
#include "backend/cuda/elementwise_map.cuh"

namespace tandem::backend::cuda {
namespace {

template <typename T>
__global__ void dropoutKernel(DropoutMask mask, const int32_t* step, int64_t first_sample,
                              int64_t samples, int64_t per_sample, int64_t groups, const T* x,
                              T* y) {
  // groups: per sample (ceil(per_sample / 8)); thread t takes group t % groups of sample
  // t / groups, so neighbouring threads take neighbouring 32-byte groups.
  for (int64_t t = gridStart(); t < samples * groups; t += gridStride())
    dropoutThread(mask, step, first_sample, per_sample, groups, t, x, y);
}

template <typename T>
void dropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample, int64_t samples,
             int64_t per_sample, const T* x, T* y, cudaStream_t stream) {
  const int64_t groups = (per_sample + DropoutMask::kPerBlock - 1) / DropoutMask::kPerBlock;
  if (samples <= 0 || groups <= 0) return;
  dropoutKernel<<<mapBlocks(samples * groups), kMapThreads, 0, stream>>>(
      mask, step, first_sample, samples, per_sample, groups, x, y);
}

}  // namespace

void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const float* x, float* y,
                   cudaStream_t stream) {
  dropout(mask, step, first_sample, samples, per_sample, x, y, stream);
}
void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const uint16_t* x, uint16_t* y,
                   cudaStream_t stream) {
  dropout(mask, step, first_sample, samples, per_sample, x, y, stream);
}

}  // namespace tandem::backend::cuda
