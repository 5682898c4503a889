#pragma once

// Own kernels of the loss family (loss.cu), enqueued on `stream`; callers check
// cudaGetLastError. Logits are f32 [rows, classes] (classes >= 1), labels i32 [rows]; a
// negative label marks a padding row, which adds no loss, gets a zero gradient and never
// counts as correct. One warp per row; per-row math in loss_math.h.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// *loss = (sum over labelled rows of lse(row) - row[label]) / divisor, summed in double
/// in a fixed order (one block: each warp's rows in row order, then the warps in order),
/// so every run gives the same bits. `loss` is a device pointer to one f32.
void launchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                               int64_t classes, double divisor, float* loss, cudaStream_t stream);

/// dlogits = (softmax(logits) - onehot(labels)) * (*dloss / divisor), zero in padding rows.
/// `dloss` is a device pointer to one f32.
void launchSoftmaxCrossEntropyBackward(const float* logits, const int32_t* labels,
                                       const float* dloss, int64_t rows, int64_t classes,
                                       double divisor, float* dlogits, cudaStream_t stream);

/// *correct = number of labelled rows whose first arg-max is their label (i32).
void launchAccuracy(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                    int32_t* correct, cudaStream_t stream);

}  // namespace tandem::backend::cuda
