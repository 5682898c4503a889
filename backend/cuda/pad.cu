// pad and pad_backward: grid-stride loops over backend/pad_math.h, one output element per
// thread forward and one input element per thread backward (a gather of the outputs that
// read it, in the CPU's order: the same sums, no atomics).

#include "backend/cuda/grid.h"
#include "backend/cuda/host_device.h"
#include "backend/cuda/pad_launch.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kThreads = 256;

int64_t elements(const int64_t* extents, int32_t rank) {
  int64_t n = 1;
  for (int32_t a = 0; a < rank; ++a) n *= extents[a];
  return n;
}

template <typename T>
__global__ void padKernel(const T* x, T* y, PadGeometry g, float value, int64_t n) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = padSourceIndex(g, o);
    store(y, o, i < 0 ? value : load(x, i));
  }
}

template <typename T>
__global__ void padBackwardKernel(const T* dy, T* dx, PadGeometry g, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    forEachPadReader(g, i, [&](int64_t o) { acc += load(dy, o); });
    store(dx, i, acc);
  }
}

template <typename T>
void pad(const T* x, T* y, const PadGeometry& g, float value, cudaStream_t stream) {
  const int64_t n = elements(g.out, g.rank);
  if (n <= 0) return;
  padKernel<T><<<gridBlocks(n, kThreads), kThreads, 0, stream>>>(x, y, g, value, n);
}

template <typename T>
void padBackward(const T* dy, T* dx, const PadGeometry& g, cudaStream_t stream) {
  const int64_t n = elements(g.in, g.rank);
  if (n <= 0) return;
  padBackwardKernel<T><<<gridBlocks(n, kThreads), kThreads, 0, stream>>>(dy, dx, g, n);
}

}  // namespace

void launchPad(const float* x, float* y, const PadGeometry& g, float value, cudaStream_t stream) {
  pad(x, y, g, value, stream);
}
void launchPad(const uint16_t* x, uint16_t* y, const PadGeometry& g, float value,
               cudaStream_t stream) {
  pad(x, y, g, value, stream);
}
void launchPadBackward(const float* dy, float* dx, const PadGeometry& g, cudaStream_t stream) {
  padBackward(dy, dx, g, stream);
}
void launchPadBackward(const uint16_t* dy, uint16_t* dx, const PadGeometry& g,
                       cudaStream_t stream) {
  padBackward(dy, dx, g, stream);
}

}  // namespace tandem::backend::cuda
