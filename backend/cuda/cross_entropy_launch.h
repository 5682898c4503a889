#pragma once

// Softmax cross-entropy with label smoothing (cross_entropy.cu), enqueued on `stream`;
// callers check cudaGetLastError. Logits f32 [rows, classes], labels i32 [rows]; a
// negative label marks a padding row (no loss, zero gradient). Per-row math in
// backend/cross_entropy_math.h, one warp per row.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// *loss = sum over labelled rows of the smoothed loss / divisor, in double, in a fixed
/// order (one block: each warp's rows in row order, then the warps in order). `loss` is
/// a device pointer to one f32.
void launchSmoothedCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t classes, double smoothing, double divisor, float* loss,
                                cudaStream_t stream);

/// dlogits = (softmax - target) * (*dloss / divisor), zero in padding rows, NaN in a row
/// whose label is past the last class. `dloss` is a device pointer to one f32.
void launchSmoothedCrossEntropyBackward(const float* logits, const int32_t* labels,
                                        const float* dloss, int64_t rows, int64_t classes,
                                        double smoothing, double divisor, float* dlogits,
                                        cudaStream_t stream);

}  // namespace tandem::backend::cuda
