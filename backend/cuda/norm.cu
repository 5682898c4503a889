// The batch-norm family's own kernels (norm_launch.h). Per-channel sums: one block per
// channel, each thread accumulating in double over a fixed stride of the channel's
// values, then a fixed shared-memory tree, so the result does not depend on timing.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/norm_launch.h"
#include "backend/cuda/norm_math.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kThreads = 256;

/// The sum of `v` over the block, the same bits on every run.
__device__ double blockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double r = shared[0];
  __syncthreads();
  return r;
}

/// Index of the k-th value of channel ch in an [N,C,HW] tensor.
__device__ __forceinline__ int64_t channelAt(int64_t k, int64_t ch, int64_t c, int64_t hw) {
  const int64_t img = k / hw;
  return (img * c + ch) * hw + (k - img * hw);
}

/// Two-pass moments of channel blockIdx.x: the sum, then squared deviations from the mean
/// rounded to float (as the CPU takes them).
template <typename T>
__device__ void channelMoments(const T* x, int64_t n, int64_t c, int64_t hw, double* shared,
                               double* sum_out, double* sq_out, float* fmean_out) {
  const int64_t ch = blockIdx.x, m = n * hw;
  double s = 0;
  for (int64_t k = threadIdx.x; k < m; k += kThreads) s += load(x, channelAt(k, ch, c, hw));
  const double sum = blockSum(s, shared);
  const float fmean = static_cast<float>(sum / static_cast<double>(m));
  double q = 0;
  for (int64_t k = threadIdx.x; k < m; k += kThreads) {
    const float d = load(x, channelAt(k, ch, c, hw)) - fmean;
    q += static_cast<double>(d * d);
  }
  *sq_out = blockSum(q, shared);
  *sum_out = sum;
  *fmean_out = fmean;
}

template <typename T>
__global__ void channelStatsKernel(const T* y, int64_t n, int64_t c, int64_t hw, double* stats) {
  __shared__ double shared[kThreads];
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
__global__ void batchNormMomentsKernel(const T* x, int64_t n, int64_t c, int64_t hw,
                                       const float* gamma, const float* beta, double eps,
                                       double momentum, float* running_mean, float* running_var,
                                       float* save_mean, float* save_invstd, float* coef) {
  __shared__ double shared[kThreads];
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
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = (i / hw) % c;
    const float r = residual != nullptr ? load(residual, i) : 0.0f;
    store(out, i, normalizeOne(load(y, i), coef[ch], coef[c + ch], residual != nullptr, r, relu));
  }
}

template <typename T>
__global__ void backwardSumsKernel(const T* dout, const T* y, const T* relu_out, int64_t n,
                                   int64_t c, int64_t hw, const float* mean, const float* invstd,
                                   double* sums, float* dbeta, float* dgamma) {
  __shared__ double shared[kThreads];
  const int64_t ch = blockIdx.x, m = n * hw;
  const float mu = mean[ch];
  double a = 0, b = 0;
  for (int64_t k = threadIdx.x; k < m; k += kThreads) {
    const int64_t at = channelAt(k, ch, c, hw);
    const float dz = maskedGrad(load(dout, at), relu_out != nullptr,
                                relu_out != nullptr ? load(relu_out, at) : 0.0f);
    a += dz;
    b += static_cast<double>(dz * (load(y, at) - mu));
  }
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
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = (i / hw) % c;
    const float dz = maskedGrad(load(dout, i), relu_out != nullptr,
                                relu_out != nullptr ? load(relu_out, i) : 0.0f);
    const NormBackward k{coef[ch], coef[c + ch], coef[2 * c + ch]};
    store(dy, i, normBackwardOne(k, dz, load(y, i), mean[ch]));
    if (dz_out != nullptr) store(dz_out, i, dz);
  }
}

__global__ void foldKernel(const float* w, const float* b, const float* gamma, const float* beta,
                           const float* mean, const float* var, int64_t k, int64_t per, double eps,
                           float* w_out, float* b_out) {
  const int64_t total = k * per;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / per;
    const double scale = foldScale(gamma[o], var[o], eps);
    w_out[i] = w[i] * static_cast<float>(scale);
    if (i - o * per == 0)
      b_out[o] = foldBias(b != nullptr ? static_cast<double>(b[o]) : 0.0, mean[o], scale, beta[o]);
  }
}

/// Blocks for a grid-stride loop over `n` elements (enough to fill a large GPU).
unsigned gridFor(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 132 * 16));
}

}  // namespace

void launchChannelStats(const void* y, bool bf16, int64_t n, int64_t c, int64_t hw,
                        double* stats, cudaStream_t stream) {
  if (bf16)
    channelStatsKernel<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(y), n, c, hw, stats);
  else
    channelStatsKernel<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        static_cast<const float*>(y), n, c, hw, stats);
}

void launchBatchNormMoments(const void* x, bool bf16, int64_t n, int64_t c, int64_t hw,
                            const float* gamma, const float* beta, double eps, double momentum,
                            float* running_mean, float* running_var, float* save_mean,
                            float* save_invstd, float* coef, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(c);
  if (bf16)
    batchNormMomentsKernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x), n, c, hw, gamma, beta, eps, momentum, running_mean,
        running_var, save_mean, save_invstd, coef);
  else
    batchNormMomentsKernel<<<blocks, kThreads, 0, stream>>>(
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
  const unsigned blocks = static_cast<unsigned>(c);
  if (bf16)
    backwardSumsKernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(dout), static_cast<const uint16_t*>(y),
        static_cast<const uint16_t*>(relu_out), n, c, hw, mean, invstd, sums, dbeta, dgamma);
  else
    backwardSumsKernel<<<blocks, kThreads, 0, stream>>>(
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
