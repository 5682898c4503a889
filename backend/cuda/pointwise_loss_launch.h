#pragma once

// The pointwise losses (pointwise_loss.cu: mse_loss, l1_loss, smooth_l1_loss,
// bce_with_logits) and their backward ops, enqueued on `stream`; callers check
// cudaGetLastError. x and target f32 of n elements; pos_weight (null: none) of
// pos_weight_n elements, broadcast over the leading axes (element i takes
// pos_weight[i % pos_weight_n]); without it every element takes `param`
// (Math::defaultParam). Per-element math in backend/pointwise_loss_math.h, the same
// code the CPU kernels run.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

struct PointwiseLossLaunch {
  const float* x = nullptr;
  const float* target = nullptr;
  const float* pos_weight = nullptr;
  int64_t n = 0, pos_weight_n = 1;
  double param = 0.0, divisor = 1.0;
};

/// *loss = sum of Math::forward over the elements / divisor, in double in a fixed order
/// (one block: each thread's elements in order, then the threads in order): the same
/// bits every run. `loss` is a device pointer to one f32.
template <typename Math>
void launchPointwiseLoss(const PointwiseLossLaunch& a, float* loss, cudaStream_t stream);

/// dx = Math::backward(x, target, p, *dloss / divisor); `dloss` a device pointer.
template <typename Math>
void launchPointwiseLossBackward(const PointwiseLossLaunch& a, const float* dloss, float* dx,
                                 cudaStream_t stream);

}  // namespace tandem::backend::cuda
