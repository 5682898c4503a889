// Softmax cross-entropy with label smoothing: one warp per row (lanes stride over the
// classes, their partial max and sums combined by fixed butterflies); the loss comes
// from a single block whose warps take rows w, w + 32, ... and whose partials are added
// in warp order, as loss.cu does for the unsmoothed loss. No atomics: the same bits every
// run. Math in backend/cross_entropy_math.h.

#include <cmath>

#include "backend/cross_entropy_math.h"
#include "backend/cuda/cross_entropy_launch.h"
#include "backend/cuda/grid.h"
#include "backend/cuda/warp_reduce.cuh"

namespace tandem::backend::cuda {
namespace {

constexpr int kReduceThreads = 1024;
constexpr int kReduceWarps = kReduceThreads / kWarpLanes;
constexpr int kBackwardThreads = 256;

/// The row's log-sum-exp and the sum of its logits, the same on every lane.
struct RowStats {
  double lse, sum;
};
__device__ RowStats rowStats(const float* row, int64_t classes, int lane) {
  const double max = warpButterflyMax(ceLaneMax(row, classes, lane, kWarpLanes));
  const CeLaneSums s = ceLaneSums(row, classes, max, lane, kWarpLanes);
  return {ceLogSumExp(max, warpButterflySum(s.exp_sum)), warpButterflySum(s.sum)};
}

__global__ void __launch_bounds__(kReduceThreads)
    lossKernel(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
               double smoothing, double divisor, float* loss) {
  __shared__ double partial[kReduceWarps];
  const int lane = laneIndex();
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  double acc = 0;
  for (int64_t r = warp; r < rows; r += kReduceWarps) {
    const int32_t label = labels[r];
    if (label < 0) continue;  // the whole warp skips it
    const float* row = logits + r * classes;
    const RowStats st = rowStats(row, classes, lane);
    acc += ceRowLoss(row, classes, label, st.lse, st.sum, smoothing);
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
    lossBackwardKernel(const float* logits, const int32_t* labels, const float* dloss, int64_t rows,
                       int64_t classes, double smoothing, double divisor, float* dlogits) {
  const double scale = static_cast<double>(*dloss) / divisor;
  const int lane = laneIndex();
  for (int64_t r = gridWarp(); r < rows; r += gridWarps()) {
    const int32_t label = labels[r];
    const float* row = logits + r * classes;
    float* drow = dlogits + r * classes;
    if (label < 0 || label >= classes) {
      const float fill = label < 0 ? 0.0f : NAN;
      for (int64_t j = lane; j < classes; j += kWarpLanes) drow[j] = fill;
      continue;
    }
    const RowStats st = rowStats(row, classes, lane);
    for (int64_t j = lane; j < classes; j += kWarpLanes)
      drow[j] = ceGrad(row[j], j == label, st.lse, smoothing, classes, scale);
  }
}

// ---- the general form: any class axis, ignore_index, class weights, a total ----------

/// The row's statistics with its classes `stride` apart, and with weights the weighted
/// sum sum_j w_j x_j; the same on every lane.
struct GeneralRowStats {
  double lse, sum, wsum;
};
__device__ GeneralRowStats generalRowStats(const float* row, const float* weight, int64_t classes,
                                           int64_t stride, int lane) {
  const double max = warpButterflyMax(ceLaneMax(row, classes, lane, kWarpLanes, stride));
  const CeLaneSums s = ceLaneSums(row, classes, max, lane, kWarpLanes, stride);
  const double wsum =
      weight != nullptr
          ? warpButterflySum(ceLaneWeightedSum(row, weight, classes, lane, kWarpLanes, stride))
          : 0.0;
  return {ceLogSumExp(max, warpButterflySum(s.exp_sum)), warpButterflySum(s.sum), wsum};
}

__device__ int64_t generalRowOffset(int64_t r, int64_t classes, int64_t inner) {
  return (r / inner) * classes * inner + r % inner;
}

/// What the sums are divided by: the total when given (read where the kernel runs: it
/// is the all-reduce's result), else the static divisor.
__device__ double generalDivisor(const CrossEntropyLaunch& a) {
  return a.total != nullptr ? static_cast<double>(*a.total) : a.divisor;
}

__global__ void __launch_bounds__(kReduceThreads)
    generalLossKernel(CrossEntropyLaunch a, float* loss) {
  __shared__ double partial[kReduceWarps];
  const int lane = laneIndex();
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  const int64_t targets = a.rows * a.inner;
  const double wtotal = a.weight != nullptr ? ceWeightTotal(a.weight, a.classes) : 0.0;
  double acc = 0;
  for (int64_t r = warp; r < targets; r += kReduceWarps) {
    const int32_t label = a.labels[r];
    if (!ceCounts(label, a.ignore_index)) continue;  // the whole warp skips it
    const float* row = a.logits + generalRowOffset(r, a.classes, a.inner);
    const GeneralRowStats st = generalRowStats(row, a.weight, a.classes, a.inner, lane);
    acc += a.weight != nullptr
               ? ceRowLossWeighted(row, a.weight, a.classes, label, st.lse, st.wsum, wtotal,
                                   a.smoothing, a.inner)
               : ceRowLoss(row, a.classes, label, st.lse, st.sum, a.smoothing, a.inner);
  }
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kReduceWarps; ++w) total += partial[w];
    *loss = static_cast<float>(total / generalDivisor(a));
  }
}

__global__ void __launch_bounds__(kBackwardThreads)
    generalLossBackwardKernel(CrossEntropyLaunch a, const float* dloss, float* dlogits) {
  const double scale = static_cast<double>(*dloss) / generalDivisor(a);
  const double wtotal = a.weight != nullptr ? ceWeightTotal(a.weight, a.classes) : 0.0;
  const int lane = laneIndex();
  const int64_t targets = a.rows * a.inner, stride = a.inner;
  for (int64_t r = gridWarp(); r < targets; r += gridWarps()) {
    const int32_t label = a.labels[r];
    const int64_t at = generalRowOffset(r, a.classes, a.inner);
    const float* row = a.logits + at;
    float* drow = dlogits + at;
    const bool counts = ceCounts(label, a.ignore_index);
    if (!counts || label >= a.classes) {
      // An ignored label is 0 even past the classes; a counted one past them is NaN.
      const float fill = counts ? NAN : 0.0f;
      for (int64_t j = lane; j < a.classes; j += kWarpLanes) drow[j * stride] = fill;
      continue;
    }
    const GeneralRowStats st = generalRowStats(row, a.weight, a.classes, stride, lane);
    if (a.weight == nullptr) {
      for (int64_t j = lane; j < a.classes; j += kWarpLanes)
        drow[j * stride] =
            ceGrad(row[j * stride], j == label, st.lse, a.smoothing, a.classes, scale);
    } else {
      const double w_label = a.weight[label];
      for (int64_t j = lane; j < a.classes; j += kWarpLanes)
        drow[j * stride] = ceGradWeighted(row[j * stride], j == label, a.weight[j], w_label, wtotal,
                                          st.lse, a.smoothing, a.classes, scale);
    }
  }
}

__global__ void __launch_bounds__(kReduceThreads)
    targetWeightSumKernel(const int32_t* labels, int64_t count, int64_t ignore_index,
                          const float* weight, int64_t classes, float* total) {
  __shared__ double partial[kReduceThreads];
  double acc = 0;
  for (int64_t r = threadIdx.x; r < count; r += kReduceThreads)
    acc += ceTargetWeight(labels[r], ignore_index, weight, classes);
  partial[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0;
    for (int t = 0; t < kReduceThreads; ++t) sum += partial[t];
    *total = static_cast<float>(sum);
  }
}

}  // namespace

void launchCrossEntropy(const CrossEntropyLaunch& a, float* loss, cudaStream_t stream) {
  // Launched even without targets: the loss is then 0 (or 0 / total), written.
  generalLossKernel<<<1, kReduceThreads, 0, stream>>>(a, loss);
}

void launchCrossEntropyBackward(const CrossEntropyLaunch& a, const float* dloss, float* dlogits,
                                cudaStream_t stream) {
  const int64_t targets = a.rows * a.inner;
  if (targets <= 0) return;
  const unsigned blocks = gridBlocks(targets, kBackwardThreads / kWarpLanes);
  generalLossBackwardKernel<<<blocks, kBackwardThreads, 0, stream>>>(a, dloss, dlogits);
}

void launchTargetWeightSum(const int32_t* labels, int64_t count, int64_t ignore_index,
                           const float* weight, int64_t classes, float* total,
                           cudaStream_t stream) {
  targetWeightSumKernel<<<1, kReduceThreads, 0, stream>>>(labels, count, ignore_index, weight,
                                                          classes, total);
}

void launchSmoothedCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t classes, double smoothing, double divisor, float* loss,
                                cudaStream_t stream) {
  // Launched even without rows: the loss is then 0, written.
  lossKernel<<<1, kReduceThreads, 0, stream>>>(logits, labels, rows, classes, smoothing, divisor,
                                               loss);
}

void launchSmoothedCrossEntropyBackward(const float* logits, const int32_t* labels,
                                        const float* dloss, int64_t rows, int64_t classes,
                                        double smoothing, double divisor, float* dlogits,
                                        cudaStream_t stream) {
  if (rows <= 0) return;
  // One warp per row: as many blocks as rows need, up to what fills this GPU (grid.h).
  const unsigned blocks = gridBlocks(rows, kBackwardThreads / kWarpLanes);
  lossBackwardKernel<<<blocks, kBackwardThreads, 0, stream>>>(
      logits, labels, dloss, rows, classes, smoothing, divisor, dlogits);
}

}  // namespace tandem::backend::cuda
