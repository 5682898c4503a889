#pragma once

// accuracy's own kernel (loss.cu; the cross-entropy's are in cross_entropy_launch.h),
// enqueued on `stream`; callers check cudaGetLastError. Logits are f32 [rows, classes]
// (classes >= 1), labels i32 [rows]; a negative label marks a padding row, which never
// counts as correct. One warp per row; per-row math in loss_math.h.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// *correct = number of labelled rows whose first arg-max is their label (i32).
void launchAccuracy(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                    int32_t* correct, cudaStream_t stream);

}  // namespace tandem::backend::cuda
