#pragma once

// Launch functions of the batch-norm family's own kernels (norm.cu). Tensors are
// [N,C,HW] planes in NCHW order; an NHWC tensor (layout_plan.h) is passed as
// [N*H*W, C, 1], which visits each channel's values in the same order (k = image * H*W +
// pixel), so both layouts give the same bits. `bf16` says activations are bf16 bits, else
// f32; the per-channel operands are f32 and statistics f64. Per-channel reductions run one
// block per channel with a fixed reduction tree: runs are bit-identical. Errors of a
// launch are picked up by the caller (cudaGetLastError).

#include <cstdint>

#include <cuda_runtime_api.h>

namespace tandem::backend::cuda {

/// stats (f64[3,C]) = per channel: count, sum, sum of squares of y (conv2d_stats), from
/// two-pass moments as batch_norm takes them.
void launchChannelStats(const void* y, bool bf16, int64_t n, int64_t c, int64_t hw,
                        double* stats, cudaStream_t stream);

/// batch_norm in training: per channel the moments of x, then save_mean, save_invstd, the
/// running statistics updated in place, and coef[2C] = scale, shift for launchNormalize.
void launchBatchNormMoments(const void* x, bool bf16, int64_t n, int64_t c, int64_t hw,
                            const float* gamma, const float* beta, double eps, double momentum,
                            float* running_mean, float* running_var, float* save_mean,
                            float* save_invstd, float* coef, cudaStream_t stream);

/// batch_norm in inference: coef[2C] from the running statistics.
void launchInferenceCoefficients(const float* gamma, const float* beta, const float* mean,
                                 const float* var, int64_t c, double eps, float* coef,
                                 cudaStream_t stream);

/// coef[2C] from a statistics tensor f64[3,C] (batch_norm_apply, batch_norm_recompute);
/// when save_mean is given also save_mean, save_invstd and the running update.
void launchStatsCoefficients(const double* stats, const float* gamma, const float* beta,
                             int64_t c, double eps, double momentum, float* running_mean,
                             float* running_var, float* save_mean, float* save_invstd,
                             float* coef, cudaStream_t stream);

/// out = relu?(y * scale + shift + residual?) with coef[2C] = scale, shift; residual may be
/// null.
void launchNormalize(const void* y, const void* residual, void* out, bool bf16, int64_t n,
                     int64_t c, int64_t hw, const float* coef, bool relu, cudaStream_t stream);

/// sums (f64[2,C]) = sum dz, sum dz * (y - mean) with dz = dout (where relu_out > 0 when
/// relu_out is given); dbeta = sums[0], dgamma = sums[1] * invstd (f32).
void launchBackwardSums(const void* dout, const void* y, const void* relu_out, bool bf16,
                        int64_t n, int64_t c, int64_t hw, const float* mean, const float* invstd,
                        double* sums, float* dbeta, float* dgamma, cudaStream_t stream);

/// coef[3C] = a, b, c of dx = a * dz + b * (y - mean) + c, from the sums, gamma, invstd
/// and the count per channel: stats[ch] (f64[3,C]) when stats is given, else `count`.
void launchBackwardCoefficients(const double* stats, double count, const double* sums,
                                const float* gamma, const float* invstd, int64_t c, float* coef,
                                cudaStream_t stream);

/// dy = a * dz + b * (y - mean) + c (coef[3C]); dz written to dz_out when given.
void launchBackwardApply(const void* dout, const void* y, const void* relu_out, void* dy,
                         void* dz_out, bool bf16, int64_t n, int64_t c, int64_t hw,
                         const float* coef, const float* mean, cudaStream_t stream);

/// fold_batch_norm: w_out[k, per] = w * scale[k], b_out[k] (b may be null).
void launchFoldBatchNorm(const float* w, const float* b, const float* gamma, const float* beta,
                         const float* mean, const float* var, int64_t k, int64_t per, double eps,
                         float* w_out, float* b_out, cudaStream_t stream);

}  // namespace tandem::backend::cuda
