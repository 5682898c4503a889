// accuracy's own kernel (the cross-entropy's are in cross_entropy.cu). One warp per row of
// logits (lanes stride over the classes, so 1000 ImageNet classes cost a warp 32 steps);
// the count of correct rows comes from a single block whose warps take rows w, w + 32, ...
// and whose partials are added in warp order: a fixed order, no atomics, the same bits
// every run. Math in loss_math.h.

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

// A butterfly: every lane ends with the same bits (each step compares the same two
// candidates on both lanes of a pair).
__device__ ArgMax warpArgMax(ArgMax a) {
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const ArgMax other{__shfl_xor_sync(kAllLanes, a.value, o),
                       __shfl_xor_sync(kAllLanes, a.index, o)};
    a = betterOf(a, other);
  }
  return a;
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
    count += predictedClass(best) == label ? 1 : 0;
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

void launchAccuracy(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                    int32_t* correct, cudaStream_t stream) {
  accuracyKernel<<<1, kReduceThreads, 0, stream>>>(logits, labels, rows, classes, correct);
}

}  // namespace tandem::backend::cuda
