#pragma once

// Own kernels of the elementwise family (elementwise.cu), enqueued on `stream`; callers
// check cudaGetLastError. Element types: float (f32), uint16_t (bf16 bits), int32_t (i32).
// Per-element math in elementwise_math.h. A result may be its operand's buffer.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// y[i] = value for i < n (constant).
void launchFill(float* y, int64_t n, float value, cudaStream_t stream);
void launchFill(int32_t* y, int64_t n, int32_t value, cudaStream_t stream);

/// y = Op::forward(x) for a unary op of backend/unary_math.h (instantiated for each in its list).
template <typename Op>
void launchUnary(const float* x, float* y, int64_t n, cudaStream_t stream);
template <typename Op>
void launchUnary(const uint16_t* x, uint16_t* y, int64_t n, cudaStream_t stream);

/// dx = Op::backward(dy, v), v the forward output or input its backward op reads.
template <typename Op>
void launchUnaryBackward(const float* dy, const float* v, float* dx, int64_t n,
                         cudaStream_t stream);
template <typename Op>
void launchUnaryBackward(const uint16_t* dy, const uint16_t* v, uint16_t* dx, int64_t n,
                         cudaStream_t stream);

/// y = clipValue(x, lo, hi) (clip) and dx = clipBackwardValue(dy, x, lo, hi) (clip_backward).
void launchClip(const float* x, float* y, int64_t n, float lo, float hi, cudaStream_t stream);
void launchClip(const uint16_t* x, uint16_t* y, int64_t n, float lo, float hi, cudaStream_t stream);
void launchClipBackward(const float* dy, const float* x, float* dx, int64_t n, float lo, float hi,
                        cudaStream_t stream);
void launchClipBackward(const uint16_t* dy, const uint16_t* x, uint16_t* dx, int64_t n, float lo,
                        float hi, cudaStream_t stream);

/// c = a + b.
void launchAdd(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream);
void launchAdd(const uint16_t* a, const uint16_t* b, uint16_t* c, int64_t n, cudaStream_t stream);
void launchAdd(const int32_t* a, const int32_t* b, int32_t* c, int64_t n, cudaStream_t stream);

/// f32 -> bf16 (round to nearest even) and bf16 -> f32 (exact).
void launchCast(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
void launchCast(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);
/// i64 -> i32, saturating (backend/narrow_ids.h): a model's i64 ids and labels.
void launchCast(const int64_t* x, int32_t* y, int64_t n, cudaStream_t stream);

/// y[p] = planeMean(x, p, hw) for each of `planes` planes of hw values (global_avg_pool);
/// `step` 1: x is NCHW, C: NHWC (y [N,C,1,1] is the same either way).
void launchGlobalAvgPool(const float* x, float* y, int64_t planes, int64_t hw, int64_t step,
                         cudaStream_t stream);
void launchGlobalAvgPool(const uint16_t* x, uint16_t* y, int64_t planes, int64_t hw, int64_t step,
                         cudaStream_t stream);

/// dx = dy of each element's plane / hw over planes * hw elements (global_avg_pool_backward),
/// dx NCHW (step 1) or NHWC (step C).
void launchGlobalAvgPoolBackward(const float* dy, float* dx, int64_t planes, int64_t hw,
                                 int64_t step, cudaStream_t stream);
void launchGlobalAvgPoolBackward(const uint16_t* dy, uint16_t* dx, int64_t planes, int64_t hw,
                                 int64_t step, cudaStream_t stream);

}  // namespace tandem::backend::cuda
