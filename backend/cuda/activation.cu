// Own kernels of the activation family: gelu (erf, tanh), tanh, sigmoid and their
// backward passes as grid-stride maps moving 16 bytes per access (elementwise_map.cuh),
// and dropout, one thread per group of four elements (one Philox call). Math in
// activation_math.h, as the host tests check it.

#include "backend/cuda/activation_launch.h"
#include "backend/cuda/activation_math.h"
#include "backend/cuda/elementwise_map.cuh"

namespace tandem::backend::cuda {
namespace {

template <Activation A>
struct Forward {
  __device__ float operator()(float x) const {
    if constexpr (A == Activation::kGeluErf) return geluErf(x);
    if constexpr (A == Activation::kGeluTanh) return geluTanh(x);
    if constexpr (A == Activation::kTanh) return tanhValue(x);
    return sigmoidValue(x);
  }
};

// (saved, dy) -> dx; saved is x for gelu, y for tanh and sigmoid.
template <Activation A>
struct Backward {
  __device__ float operator()(float saved, float dy) const {
    if constexpr (A == Activation::kGeluErf) return geluErfGrad(dy, saved);
    if constexpr (A == Activation::kGeluTanh) return geluTanhGrad(dy, saved);
    if constexpr (A == Activation::kTanh) return tanhGradFromY(dy, saved);
    return sigmoidGradFromY(dy, saved);
  }
};

template <typename T>
void forward(Activation a, const T* x, T* y, int64_t n, cudaStream_t stream) {
  switch (a) {
    case Activation::kGeluErf:
      return launchMap1(x, y, n, Forward<Activation::kGeluErf>{}, stream);
    case Activation::kGeluTanh:
      return launchMap1(x, y, n, Forward<Activation::kGeluTanh>{}, stream);
    case Activation::kTanh:
      return launchMap1(x, y, n, Forward<Activation::kTanh>{}, stream);
    case Activation::kSigmoid:
      return launchMap1(x, y, n, Forward<Activation::kSigmoid>{}, stream);
  }
}

template <typename T>
void backward(Activation a, const T* saved, const T* dy, T* dx, int64_t n, cudaStream_t stream) {
  switch (a) {
    case Activation::kGeluErf:
      return launchMap2(saved, dy, dx, n, Backward<Activation::kGeluErf>{}, stream);
    case Activation::kGeluTanh:
      return launchMap2(saved, dy, dx, n, Backward<Activation::kGeluTanh>{}, stream);
    case Activation::kTanh:
      return launchMap2(saved, dy, dx, n, Backward<Activation::kTanh>{}, stream);
    case Activation::kSigmoid:
      return launchMap2(saved, dy, dx, n, Backward<Activation::kSigmoid>{}, stream);
  }
}

template <typename T>
__global__ void dropoutKernel(DropoutMask mask, const int32_t* step, int64_t first_sample,
                              int64_t samples, int64_t per_sample, int64_t groups, const T* x,
                              T* y) {
  // groups: per sample (ceil(per_sample / 4)); thread t takes group t % groups of sample
  // t / groups, so neighbouring threads take neighbouring 16-byte groups.
  for (int64_t t = gridStart(); t < samples * groups; t += gridStride())
    dropoutThread(mask, step, first_sample, per_sample, groups, t, x, y);
}

template <typename T>
void dropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample, int64_t samples,
             int64_t per_sample, const T* x, T* y, cudaStream_t stream) {
  const int64_t groups = (per_sample + 3) / 4;
  if (samples <= 0 || groups <= 0) return;
  dropoutKernel<<<mapBlocks(samples * groups), kMapThreads, 0, stream>>>(
      mask, step, first_sample, samples, per_sample, groups, x, y);
}

}  // namespace

void launchActivation(Activation a, const float* x, float* y, int64_t n, cudaStream_t stream) {
  forward(a, x, y, n, stream);
}
void launchActivation(Activation a, const uint16_t* x, uint16_t* y, int64_t n,
                      cudaStream_t stream) {
  forward(a, x, y, n, stream);
}

void launchActivationBackward(Activation a, const float* saved, const float* dy, float* dx,
                              int64_t n, cudaStream_t stream) {
  backward(a, saved, dy, dx, n, stream);
}
void launchActivationBackward(Activation a, const uint16_t* saved, const uint16_t* dy, uint16_t* dx,
                              int64_t n, cudaStream_t stream) {
  backward(a, saved, dy, dx, n, stream);
}

void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const float* x, float* y,
                   cudaStream_t stream) {
  dropout(mask, step, first_sample, samples, per_sample, x, y, stream);
}
void launchDropout(const DropoutMask& mask, const int32_t* step, int64_t first_sample,
                   int64_t samples, int64_t per_sample, const uint16_t* x, uint16_t* y,
                   cudaStream_t stream) {
  dropout(mask, step, first_sample, samples, per_sample, x, y, stream);
}

}  // namespace tandem::backend::cuda
