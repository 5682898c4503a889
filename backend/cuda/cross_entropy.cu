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

}  // namespace

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
