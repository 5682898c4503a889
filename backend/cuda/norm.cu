// The batch-norm family's own kernels (norm_launch.h). Per-channel sums: one block of
// kReduceThreads per channel, thread t adding in double the channel's values t, t + T,
// t + 2T, ... (in the order k = img * hw + i), then a fixed shared-memory tree: no
// atomics, so the result does not depend on timing and runs are bit-identical. The
// elementwise passes are grid-stride loops. Neither divides per element: the index
// walkers of norm_math.h carry the place in the plane and the channel along.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/grid.h"
#include "backend/cuda/norm_launch.h"
#include "backend/cuda/norm_math.h"

namespace tandem::backend::cuda {
namespace {

/// Threads of a per-channel reduction block (norm_math.h). __launch_bounds__ holds every
/// reduction kernel to it, so it always fits (ptxas: at most 44 registers, no spills).
constexpr int kReduceThreads = kNormReduceThreads;
/// Threads of a block of the elementwise kernels (grid-stride loops).
constexpr int kThreads = 256;

/// The sum of `v` over the block (kReduceThreads threads) by a fixed tree: the same bits
/// on every run.
__device__ double blockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double r = shared[0];
  __syncthreads();
  return r;
}

/// f(at) for this thread's share of channel blockIdx.x's m = n * hw values (k = threadIdx.x,
/// + kReduceThreads, ...), in that order.
template <typename F>
__device__ void forChannel(int64_t m, int64_t c, int64_t hw, F f) {
  const int64_t k0 = threadIdx.x;
  if (k0 >= m) return;
  ChannelWalk w(k0, blockIdx.x, c, hw, kReduceThreads);
  for (int64_t k = k0; k < m; k += kReduceThreads, w.next()) f(w.at);
}

/// f(l, channel of l) for this thread's elements of an [N,C,HW] tensor of `total` values
/// (a grid-stride loop).
template <typename F>
__device__ void forElements(int64_t total, int64_t c, int64_t hw, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t l0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (l0 >= total) return;
  ChannelOf w(l0, c, hw, step);
  for (int64_t l = l0; l < total; l += step, w.next()) f(l, w.ch);
}

/// Two-pass moments of channel blockIdx.x: the sum, then squared deviations from the mean
/// rounded to float (as the CPU takes them), each value's term added in double.
template <typename T>
__device__ void channelMoments(const T* x, int64_t n, int64_t c, int64_t hw, double* shared,
                               double* sum_out, double* sq_out, float* fmean_out) {
  const int64_t m = n * hw;
  double s = 0;
  forChannel(m, c, hw, [&](int64_t at) { s += load(x, at); });
  const double sum = blockSum(s, shared);
  const float fmean = static_cast<float>(sum / static_cast<double>(m));
  double q = 0;
  forChannel(m, c, hw, [&](int64_t at) {
    const float d = load(x, at) - fmean;
    q += static_cast<double>(d * d);
  });
  *sq_out = blockSum(q, shared);
  *sum_out = sum;
  *fmean_out = fmean;
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    channelStatsKernel(const T* y, int64_t n, int64_t c, int64_t hw, double* stats) {
  __shared__ double shared[kReduceThreads];
  double sum, sq;
  float fmean;
  channelMoments(y, n, c, hw, shared, &sum, &sq, &fmean);
  if (threadIdx.x == 0) {
    const StatsRow r = statsRow(static_cast<double>(n * hw), sum, sq, fmean);
    stats[blockIdx.x] = r.count;
    stats[c + blockIdx.x] = r.sum;
    stats[2 * c + blockIdx.x] = r.sumsq;
  }
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    batchNormMomentsKernel(const T* x, int64_t n, int64_t c, int64_t hw, const float* gamma,
                           const float* beta, double eps, double momentum, float* running_mean,
                           float* running_var, float* save_mean, float* save_invstd,
                           float* coef) {
  __shared__ double shared[kReduceThreads];
  double sum, sq;
  float fmean;
  channelMoments(x, n, c, hw, shared, &sum, &sq, &fmean);
  if (threadIdx.x != 0) return;
  const int64_t ch = blockIdx.x;
  const double m = static_cast<double>(n * hw), mean = sum / m;
  const double var = momentsVar(m, sum, sq, fmean);
  const NormAffine a = normAffine(mean, var, gamma[ch], beta[ch], eps);
  coef[ch] = a.scale;
  coef[c + ch] = a.shift;
  save_mean[ch] = fmean;
  save_invstd[ch] = static_cast<float>(a.invstd);
  updateRunning(running_mean + ch, running_var + ch, mean, var, m, momentum);
}

__global__ void inferenceCoefficientsKernel(const float* gamma, const float* beta,
                                            const float* mean, const float* var, int64_t c,
                                            double eps, float* coef) {
  for (int64_t ch = blockIdx.x * blockDim.x + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const NormAffine a = inferenceAffine(mean[ch], var[ch], gamma[ch], beta[ch], eps);
    coef[ch] = a.scale;
    coef[c + ch] = a.shift;
  }
}

__global__ void statsCoefficientsKernel(const double* stats, const float* gamma, const float* beta,
                                        int64_t c, double eps, double momentum,
                                        float* running_mean, float* running_var,
                                        float* save_mean, float* save_invstd, float* coef) {
  for (int64_t ch = blockIdx.x * blockDim.x + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const NormStats st = readNormStats(stats, c, ch);
    const NormAffine a = normAffine(st.mean, st.var, gamma[ch], beta[ch], eps);
    coef[ch] = a.scale;
    coef[c + ch] = a.shift;
    if (save_mean != nullptr) {
      save_mean[ch] = static_cast<float>(st.mean);
      save_invstd[ch] = static_cast<float>(a.invstd);
      updateRunning(running_mean + ch, running_var + ch, st.mean, st.var, st.count, momentum);
    }
  }
}

template <typename T>
__global__ void normalizeKernel(const T* y, const T* residual, T* out, int64_t total, int64_t c,
                                int64_t hw, const float* coef, bool relu) {
  forElements(total, c, hw, [&](int64_t i, int64_t ch) {
    const float r = residual != nullptr ? load(residual, i) : 0.0f;
    store(out, i, normalizeOne(load(y, i), coef[ch], coef[c + ch], residual != nullptr, r, relu));
  });
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    backwardSumsKernel(const T* dout, const T* y, const T* relu_out, int64_t n, int64_t c,
                       int64_t hw, const float* mean, const float* invstd, double* sums,
                       float* dbeta, float* dgamma) {
  __shared__ double shared[kReduceThreads];
  const int64_t ch = blockIdx.x;
  const float mu = mean[ch];
  double a = 0, b = 0;
  forChannel(n * hw, c, hw, [&](int64_t at) {
    const float dz = maskedGrad(load(dout, at), relu_out != nullptr,
                                relu_out != nullptr ? load(relu_out, at) : 0.0f);
    a += dz;
    b += static_cast<double>(dz * (load(y, at) - mu));
  });
  const double sum_dz = blockSum(a, shared);
  const double sum_dz_yc = blockSum(b, shared);
  if (threadIdx.x == 0) {
    sums[ch] = sum_dz;
    sums[c + ch] = sum_dz_yc;
    dbeta[ch] = static_cast<float>(sum_dz);
    dgamma[ch] = static_cast<float>(sum_dz_yc * static_cast<double>(invstd[ch]));
  }
}

__global__ void backwardCoefficientsKernel(const double* stats, double count, const double* sums,
                                           const float* gamma, const float* invstd, int64_t c,
                                           float* coef) {
  for (int64_t ch = blockIdx.x * blockDim.x + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double m = stats != nullptr ? stats[ch] : count;
    const NormBackward k = normBackward(m, sums[ch], sums[c + ch], gamma[ch], invstd[ch]);
    coef[ch] = k.a;
    coef[c + ch] = k.b;
    coef[2 * c + ch] = k.c;
  }
}

template <typename T>
__global__ void backwardApplyKernel(const T* dout, const T* y, const T* relu_out, T* dy,
                                    T* dz_out, int64_t total, int64_t c, int64_t hw,
                                    const float* coef, const float* mean) {
  forElements(total, c, hw, [&](int64_t i, int64_t ch) {
    const float dz = maskedGrad(load(dout, i), relu_out != nullptr,
                                relu_out != nullptr ? load(relu_out, i) : 0.0f);
    const NormBackward k{coef[ch], coef[c + ch], coef[2 * c + ch]};
    store(dy, i, normBackwardOne(k, dz, load(y, i), mean[ch]));
    if (dz_out != nullptr) store(dz_out, i, dz);
  });
}

/// fold_batch_norm: output channel o of w[k, per] as the "channel" of [1, k, per].
__global__ void foldKernel(const float* w, const float* b, const float* gamma, const float* beta,
                           const float* mean, const float* var, int64_t k, int64_t per, double eps,
                           float* w_out, float* b_out) {
  forElements(k * per, k, per, [&](int64_t i, int64_t o) {
    const double scale = foldScale(gamma[o], var[o], eps);
    w_out[i] = w[i] * static_cast<float>(scale);
    if (i % per == 0)
      b_out[o] = foldBias(b != nullptr ? static_cast<double>(b[o]) : 0.0, mean[o], scale, beta[o]);
  });
}

/// Blocks for a grid-stride loop over `n` elements (enough to fill this GPU: grid.h).
unsigned gridFor(int64_t n) { return gridBlocks(n, kThreads); }

}  // namespace

void launchChannelStats(const void* y, bool bf16, int64_t n, int64_t c, int64_t hw,
                        double* stats, cudaStream_t stream) {
  if (c == 0) return;  // a grid of no blocks is a launch error; there is nothing to do
  const unsigned blocks = static_cast<unsigned>(c);
  if (bf16)
    channelStatsKernel<<<blocks, kReduceThreads, 0, stream>>>(
        static_cast<const uint16_t*>(y), n, c, hw, stats);
  else
    channelStatsKernel<<<blocks, kReduceThreads, 0, stream>>>(
        static_cast<const float*>(y), n, c, hw, stats);
}

void launchBatchNormMoments(const void* x, bool bf16, int64_t n, int64_t c, int64_t hw,
                            const float* gamma, const float* beta, double eps, double momentum,
                            float* running_mean, float* running_var, float* save_mean,
                            float* save_invstd, float* coef, cudaStream_t stream) {
  if (c == 0) return;
  const unsigned blocks = static_cast<unsigned>(c);
  if (bf16)
    batchNormMomentsKernel<<<blocks, kReduceThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x), n, c, hw, gamma, beta, eps, momentum, running_mean,
        running_var, save_mean, save_invstd, coef);
  else
    batchNormMomentsKernel<<<blocks, kReduceThreads, 0, stream>>>(
        static_cast<const float*>(x), n, c, hw, gamma, beta, eps, momentum, running_mean,
        running_var, save_mean, save_invstd, coef);
}

void launchInferenceCoefficients(const float* gamma, const float* beta, const float* mean,
                                 const float* var, int64_t c, double eps, float* coef,
                                 cudaStream_t stream) {
  inferenceCoefficientsKernel<<<gridFor(c), kThreads, 0, stream>>>(gamma, beta, mean, var, c, eps,
                                                                    coef);
}

void launchStatsCoefficients(const double* stats, const float* gamma, const float* beta,
                             int64_t c, double eps, double momentum, float* running_mean,
                             float* running_var, float* save_mean, float* save_invstd,
                             float* coef, cudaStream_t stream) {
  statsCoefficientsKernel<<<gridFor(c), kThreads, 0, stream>>>(
      stats, gamma, beta, c, eps, momentum, running_mean, running_var, save_mean, save_invstd,
      coef);
}

void launchNormalize(const void* y, const void* residual, void* out, bool bf16, int64_t n,
                     int64_t c, int64_t hw, const float* coef, bool relu, cudaStream_t stream) {
  const int64_t total = n * c * hw;
  if (bf16)
    normalizeKernel<<<gridFor(total), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(y), static_cast<const uint16_t*>(residual),
        static_cast<uint16_t*>(out), total, c, hw, coef, relu);
  else
    normalizeKernel<<<gridFor(total), kThreads, 0, stream>>>(
        static_cast<const float*>(y), static_cast<const float*>(residual),
        static_cast<float*>(out), total, c, hw, coef, relu);
}

void launchBackwardSums(const void* dout, const void* y, const void* relu_out, bool bf16,
                        int64_t n, int64_t c, int64_t hw, const float* mean, const float* invstd,
                        double* sums, float* dbeta, float* dgamma, cudaStream_t stream) {
  if (c == 0) return;
  const unsigned blocks = static_cast<unsigned>(c);
  if (bf16)
    backwardSumsKernel<<<blocks, kReduceThreads, 0, stream>>>(
        static_cast<const uint16_t*>(dout), static_cast<const uint16_t*>(y),
        static_cast<const uint16_t*>(relu_out), n, c, hw, mean, invstd, sums, dbeta, dgamma);
  else
    backwardSumsKernel<<<blocks, kReduceThreads, 0, stream>>>(
        static_cast<const float*>(dout), static_cast<const float*>(y),
        static_cast<const float*>(relu_out), n, c, hw, mean, invstd, sums, dbeta, dgamma);
}

void launchBackwardCoefficients(const double* stats, double count, const double* sums,
                                const float* gamma, const float* invstd, int64_t c, float* coef,
                                cudaStream_t stream) {
  backwardCoefficientsKernel<<<gridFor(c), kThreads, 0, stream>>>(stats, count, sums, gamma,
                                                                   invstd, c, coef);
}

void launchBackwardApply(const void* dout, const void* y, const void* relu_out, void* dy,
                         void* dz_out, bool bf16, int64_t n, int64_t c, int64_t hw,
                         const float* coef, const float* mean, cudaStream_t stream) {
  const int64_t total = n * c * hw;
  if (bf16)
    backwardApplyKernel<<<gridFor(total), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(dout), static_cast<const uint16_t*>(y),
        static_cast<const uint16_t*>(relu_out), static_cast<uint16_t*>(dy),
        static_cast<uint16_t*>(dz_out), total, c, hw, coef, mean);
  else
    backwardApplyKernel<<<gridFor(total), kThreads, 0, stream>>>(
        static_cast<const float*>(dout), static_cast<const float*>(y),
        static_cast<const float*>(relu_out), static_cast<float*>(dy),
        static_cast<float*>(dz_out), total, c, hw, coef, mean);
}

void launchFoldBatchNorm(const float* w, const float* b, const float* gamma, const float* beta,
                         const float* mean, const float* var, int64_t k, int64_t per, double eps,
                         float* w_out, float* b_out, cudaStream_t stream) {
  foldKernel<<<gridFor(k * per), kThreads, 0, stream>>>(w, b, gamma, beta, mean, var, k, per, eps,
                                                        w_out, b_out);
}

}  // namespace tandem::backend::cuda
