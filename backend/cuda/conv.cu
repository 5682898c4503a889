// Own kernels of the convolution family: the epilogue after cuDNN's convolution (bias,
// residual, relu) and the bias gradient (one block per channel, partials added in a
// fixed tree, so runs are bit-identical). Math in conv_math.h.

#include <algorithm>
#include <type_traits>

#include "backend/cuda/grid.h"
#include "backend/cuda/conv_launch.h"
#include "backend/cuda/conv_math.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) { return gridBlocks(n, kThreads); }

template <typename T, typename B>
__global__ void epilogueKernel(T* y, const B* bias, const T* residual, bool relu, int64_t total,
                               int64_t channels, int64_t hw) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(y, i, convEpilogueAt(y, bias, residual, relu, i, channels, hw));
}

template <typename T, typename D>
__global__ void __launch_bounds__(kBiasGradThreads)
    biasGradKernel(const T* dy, D* db, int64_t n, int64_t channels, int64_t hw) {
  __shared__ float partial[kBiasGradThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    partial[t] = biasGradPartial(dy, n, channels, hw, c, t);
    __syncthreads();
    for (int s = kBiasGradThreads / 2; s > 0; s /= 2) {
      if (t < s) partial[t] = partial[t] + partial[t + s];
      __syncthreads();
    }
    if (t == 0) store(db, c, partial[0]);
    __syncthreads();  // partial[0] is read before the next channel overwrites it
  }
}

/// One element per thread over the NCHW index i: reads coalesced going to NHWC, writes
/// coalesced coming back. Only tensors at the plan's border and filters pass here.
template <typename S, typename D>
__global__ void relayoutKernel(const S* src, D* dst, int64_t total, int64_t c, int64_t hw,
                               bool to_nhwc) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = nhwcIndexOf(i, c, hw);
    const int64_t from = to_nhwc ? i : o, to = to_nhwc ? o : i;
    if constexpr (std::is_same_v<S, D>)
      dst[to] = src[from];  // the bits as they are
    else
      store(dst, to, load(src, from));
  }
}

template <typename S, typename D>
void relayout(const S* src, D* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
              cudaStream_t stream) {
  const int64_t total = n * c * hw;
  if (total <= 0) return;
  relayoutKernel<<<blocksFor(total), kThreads, 0, stream>>>(src, dst, total, c, hw, to_nhwc);
}

template <typename T, typename B>
void epilogue(T* y, const B* bias, const T* residual, bool relu, int64_t n, int64_t channels,
              int64_t hw, cudaStream_t stream) {
  const int64_t total = n * channels * hw;
  if (total <= 0) return;
  epilogueKernel<<<blocksFor(total), kThreads, 0, stream>>>(y, bias, residual, relu, total,
                                                            channels, hw);
}

template <typename T, typename D>
void biasGrad(const T* dy, D* db, int64_t n, int64_t channels, int64_t hw, cudaStream_t stream) {
  if (channels <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(channels, 65535));
  biasGradKernel<<<blocks, kBiasGradThreads, 0, stream>>>(dy, db, n, channels, hw);
}

}  // namespace

void launchConvEpilogue(float* y, const float* bias, const float* residual, bool relu, int64_t n,
                        int64_t channels, int64_t hw, cudaStream_t stream) {
  epilogue(y, bias, residual, relu, n, channels, hw, stream);
}
void launchConvEpilogue(uint16_t* y, const float* bias, const uint16_t* residual, bool relu,
                        int64_t n, int64_t channels, int64_t hw, cudaStream_t stream) {
  epilogue(y, bias, residual, relu, n, channels, hw, stream);
}
void launchConvEpilogue(uint16_t* y, const uint16_t* bias, const uint16_t* residual, bool relu,
                        int64_t n, int64_t channels, int64_t hw, cudaStream_t stream) {
  epilogue(y, bias, residual, relu, n, channels, hw, stream);
}

void launchBiasGrad(const float* dy, float* db, int64_t n, int64_t channels, int64_t hw,
                    cudaStream_t stream) {
  biasGrad(dy, db, n, channels, hw, stream);
}
void launchBiasGrad(const uint16_t* dy, float* db, int64_t n, int64_t channels, int64_t hw,
                    cudaStream_t stream) {
  biasGrad(dy, db, n, channels, hw, stream);
}
void launchBiasGrad(const uint16_t* dy, uint16_t* db, int64_t n, int64_t channels, int64_t hw,
                    cudaStream_t stream) {
  biasGrad(dy, db, n, channels, hw, stream);
}

void launchRelayout(const float* src, float* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                    cudaStream_t stream) {
  relayout(src, dst, n, c, hw, to_nhwc, stream);
}
void launchRelayout(const uint16_t* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw,
                    bool to_nhwc, cudaStream_t stream) {
  relayout(src, dst, n, c, hw, to_nhwc, stream);
}
void launchRelayout(const float* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                    cudaStream_t stream) {
  relayout(src, dst, n, c, hw, to_nhwc, stream);
}
void launchRelayout(const uint16_t* src, float* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                    cudaStream_t stream) {
  relayout(src, dst, n, c, hw, to_nhwc, stream);
}

}  // namespace tandem::backend::cuda
