// Own kernels of the loss family: softmax cross-entropy, its backward and accuracy. One
// warp per row of logits (lanes stride over the classes, so 1000 ImageNet classes cost a
// warp 32 steps); the scalar results (the loss, the count of correct rows) come from a
// single block whose warps take rows w, w + 32, ... and whose partials are added in warp
// order: a fixed order, no atomics, the same bits every run. Math in loss_math.h.

#include <algorithm>
#include <cmath>

#include "backend/cuda/grid.h"
#include "backend/cuda/loss_launch.h"
#include "backend/cuda/loss_math.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kAllLanes = 0xffffffffu;
// The single block of the reductions: 32 warps.
constexpr int kReduceThreads = 1024;
constexpr int kReduceWarps = kReduceThreads / kWarp;
// The backward's blocks: 8 warps, as many blocks as rows need (up to what fills the GPU).
constexpr int kBackwardThreads = 256;

// Butterflies: every lane ends with the same bits (each step adds or compares the same
// two values on both lanes of a pair).
__device__ double warpMax(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(kAllLanes, v, o));
  return v;
}

__device__ double warpSum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kAllLanes, v, o);
  return v;
}

__device__ ArgMax warpArgMax(ArgMax a) {
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const ArgMax other{__shfl_xor_sync(kAllLanes, a.value, o),
                       __shfl_xor_sync(kAllLanes, a.index, o)};
    a = betterOf(a, other);
  }
  return a;
}

/// The row's log-sum-exp, the same on every lane of the warp.
__device__ double rowLogSumExp(const float* row, int64_t classes, int lane) {
  const double max = warpMax(laneMax(row, classes, lane, kWarp));
  return logSumExpOf(max, warpSum(laneExpSum(row, classes, max, lane, kWarp)));
}

__global__ void __launch_bounds__(kReduceThreads)
    softmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int64_t rows,
                              int64_t classes, double divisor, float* loss) {
  __shared__ double partial[kReduceWarps];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  double acc = 0;
  for (int64_t r = warp; r < rows; r += kReduceWarps) {
    const int32_t label = labels[r];
    if (label < 0) continue;  // the whole warp skips it
    const float* row = logits + r * classes;
    acc += rowLoss(row, classes, label, rowLogSumExp(row, classes, lane));
  }
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kReduceWarps; ++w) total += partial[w];
    *loss = static_cast<float>(total / divisor);
  }
}

__global__ void __launch_bounds__(kBackwardThreads)
    softmaxCrossEntropyBackwardKernel(const float* logits, const int32_t* labels,
                                      const float* dloss, int64_t rows, int64_t classes,
                                      double divisor, float* dlogits) {
  const double scale = static_cast<double>(*dloss) / divisor;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t first = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t r = first; r < rows; r += warps) {
    const int32_t label = labels[r];
    const float* row = logits + r * classes;
    float* drow = dlogits + r * classes;
    if (label < 0 || label >= classes) {
      // Padding: no gradient. A label past the last class (a data bug): NaN, visibly.
      const float fill = label < 0 ? 0.0f : NAN;
      for (int64_t j = lane; j < classes; j += kWarp) drow[j] = fill;
      continue;
    }
    const double lse = rowLogSumExp(row, classes, lane);
    for (int64_t j = lane; j < classes; j += kWarp)
      drow[j] = softmaxGrad(row[j], j == label, lse, scale);
  }
}

__global__ void __launch_bounds__(kReduceThreads)
    accuracyKernel(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                   int32_t* correct) {
  __shared__ int32_t partial[kReduceWarps];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  int32_t count = 0;
  for (int64_t r = warp; r < rows; r += kReduceWarps) {
    const int32_t label = labels[r];
    if (label < 0) continue;  // the whole warp skips it
    const float* row = logits + r * classes;
    const ArgMax best = warpArgMax(laneArgMax(row, classes, lane, kWarp));
    count += predictedClass(row, best) == label ? 1 : 0;
  }
  if (lane == 0) partial[warp] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t total = 0;
    for (int w = 0; w < kReduceWarps; ++w) total += partial[w];
    *correct = total;
  }
}

}  // namespace

void launchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                               int64_t classes, double divisor, float* loss, cudaStream_t stream) {
  // Launched even without rows: the loss is then 0, written.
  softmaxCrossEntropyKernel<<<1, kReduceThreads, 0, stream>>>(logits, labels, rows, classes,
                                                              divisor, loss);
}

void launchSoftmaxCrossEntropyBackward(const float* logits, const int32_t* labels,
                                       const float* dloss, int64_t rows, int64_t classes,
                                       double divisor, float* dlogits, cudaStream_t stream) {
  if (rows <= 0) return;
  // One warp per row: as many blocks as rows need, up to what fills this GPU.
  constexpr int kWarpsPerBlock = kBackwardThreads / kWarp;
  const unsigned blocks = gridBlocks(rows, kWarpsPerBlock);
  softmaxCrossEntropyBackwardKernel<<<blocks, kBackwardThreads, 0, stream>>>(
      logits, labels, dloss, rows, classes, divisor, dlogits);
}

void launchAccuracy(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                    int32_t* correct, cudaStream_t stream) {
  accuracyKernel<<<1, kReduceThreads, 0, stream>>>(logits, labels, rows, classes, correct);
}

}  // namespace tandem::backend::cuda
