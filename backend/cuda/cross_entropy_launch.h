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

/// The general form (cross_entropy.cu's second pair of kernels): classes on any axis
/// (`inner` floats apart: the logits as [rows, classes, inner], a target's label at
/// labels[r * inner + i]), an ignored label besides the negative ones, optional class
/// weights f32[classes] and an optional total (one f32 on the device, target_weight_sum's
/// all-reduced count) that replaces the divisor. The plain [N, C] loss keeps the
/// functions above and their bits.
struct CrossEntropyLaunch {
  const float* logits = nullptr;
  const int32_t* labels = nullptr;
  const float* weight = nullptr;  // null: unweighted
  const float* total = nullptr;   // null: divide by `divisor`
  int64_t rows = 0, classes = 0, inner = 1;
  double smoothing = 0.0, divisor = 1.0;
  int64_t ignore_index = -100;
};

/// *loss = the counted targets' summed (weighted) loss / divisor (or / *total), in double
/// in a fixed order (one block, as launchSmoothedCrossEntropy).
void launchCrossEntropy(const CrossEntropyLaunch& a, float* loss, cudaStream_t stream);

/// dlogits, zero for targets that do not count, NaN in a target whose label is past the
/// last class.
void launchCrossEntropyBackward(const CrossEntropyLaunch& a, const float* dloss, float* dlogits,
                                cudaStream_t stream);

/// *total = sum over the `count` labels that count of weight[label] (1 without weights),
/// in double in a fixed order (one block).
void launchTargetWeightSum(const int32_t* labels, int64_t count, int64_t ignore_index,
                           const float* weight, int64_t classes, float* total, cudaStream_t stream);

}  // namespace tandem::backend::cuda
