#pragma once

// Own kernels of the convolution family (conv.cu), enqueued on `stream`; callers check
// cudaGetLastError. Element types: float (f32) or uint16_t (bf16 bits). Math in
// conv_math.h.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// In place over y[n, channels, hw] (the convolution without bias): y = relu?(round(y +
/// bias[c]) + residual?) (convEpilogueAt); `residual` may be null. The bias is in the
/// activations' type or f32 (master weights).
void launchConvEpilogue(float* y, const float* bias, const float* residual, bool relu, int64_t n,
                        int64_t channels, int64_t hw, cudaStream_t stream);
void launchConvEpilogue(uint16_t* y, const float* bias, const uint16_t* residual, bool relu,
                        int64_t n, int64_t channels, int64_t hw, cudaStream_t stream);
void launchConvEpilogue(uint16_t* y, const uint16_t* bias, const uint16_t* residual, bool relu,
                        int64_t n, int64_t channels, int64_t hw, cudaStream_t stream);

/// db[c] = sum of dy[:, c, :] (biasGradPartial, then a fixed tree): the bias gradient,
/// in the bias's dtype (f32 master weights, or the activations' type).
void launchBiasGrad(const float* dy, float* db, int64_t n, int64_t channels, int64_t hw,
                    cudaStream_t stream);
void launchBiasGrad(const uint16_t* dy, float* db, int64_t n, int64_t channels, int64_t hw,
                    cudaStream_t stream);
void launchBiasGrad(const uint16_t* dy, uint16_t* db, int64_t n, int64_t channels, int64_t hw,
                    cudaStream_t stream);

/// dst = src between layouts: NCHW [n, c, hw] -> NHWC [n, hw, c] (to_nhwc) or back
/// (nhwcIndexOf), converting the element type on the way where the two differ (f32 master
/// weights to bf16, rounded to nearest even; a bf16 dw widened to f32): activations at the
/// border of the layout plan, and filters KCRS <-> KRSC (n = k, hw = r * s).
void launchRelayout(const float* src, float* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                    cudaStream_t stream);
void launchRelayout(const uint16_t* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw,
                    bool to_nhwc, cudaStream_t stream);
void launchRelayout(const float* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                    cudaStream_t stream);
void launchRelayout(const uint16_t* src, float* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                    cudaStream_t stream);

}  // namespace tandem::backend::cuda
