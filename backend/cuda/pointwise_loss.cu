// The pointwise losses and their backward ops: the loss from a single block whose threads
// take elements t, t + 1024, ... and whose partial sums are added in thread order (no
// atomics: the same bits every run); the gradient one thread per element over a grid
// that fills the GPU. Math in backend/pointwise_loss_math.h.

#include "backend/cuda/grid.h"
#include "backend/cuda/pointwise_loss_launch.h"
#include "backend/pointwise_loss_math.h"
#include "ir/kernel_ops.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kPointwiseReduceThreads = 1024;
constexpr int kPointwiseThreads = 256;

__device__ __forceinline__ double pointwiseParam(const PointwiseLossLaunch& a, int64_t i) {
  return a.pos_weight != nullptr ? static_cast<double>(a.pos_weight[i % a.pos_weight_n]) : a.param;
}

template <typename Math>
__global__ void __launch_bounds__(kPointwiseReduceThreads)
    pointwiseLossKernel(PointwiseLossLaunch a, float* loss) {
  __shared__ double partial[kPointwiseReduceThreads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < a.n; i += kPointwiseReduceThreads)
    acc += Math::forward(a.x[i], a.target[i], pointwiseParam(a, i));
  partial[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0;
    for (int t = 0; t < kPointwiseReduceThreads; ++t) sum += partial[t];
    *loss = static_cast<float>(sum / a.divisor);
  }
}

template <typename Math>
__global__ void __launch_bounds__(kPointwiseThreads)
    pointwiseLossBackwardKernel(PointwiseLossLaunch a, const float* dloss, float* dx) {
  const double scale = static_cast<double>(*dloss) / a.divisor;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.n; i += step)
    dx[i] = Math::backward(a.x[i], a.target[i], pointwiseParam(a, i), scale);
}

}  // namespace

template <typename Math>
void launchPointwiseLoss(const PointwiseLossLaunch& a, float* loss, cudaStream_t stream) {
  // Launched even without elements: the loss is then 0, written.
  pointwiseLossKernel<Math><<<1, kPointwiseReduceThreads, 0, stream>>>(a, loss);
}

template <typename Math>
void launchPointwiseLossBackward(const PointwiseLossLaunch& a, const float* dloss, float* dx,
                                 cudaStream_t stream) {
  if (a.n <= 0) return;
  const unsigned blocks = gridBlocks(a.n, kPointwiseThreads);
  pointwiseLossBackwardKernel<Math><<<blocks, kPointwiseThreads, 0, stream>>>(a, dloss, dx);
}

#define TANDEM_CUDA_POINTWISE_LOSS_LAUNCHES(Name)                                                  \
  template void launchPointwiseLoss<Name##Math>(const PointwiseLossLaunch&, float*, cudaStream_t); \
  template void launchPointwiseLossBackward<Name##Math>(const PointwiseLossLaunch&, const float*,  \
                                                        float*, cudaStream_t);
TANDEM_POINTWISE_LOSS_OPS(TANDEM_CUDA_POINTWISE_LOSS_LAUNCHES)
#undef TANDEM_CUDA_POINTWISE_LOSS_LAUNCHES

}  // namespace tandem::backend::cuda
