// Embedding lookup's own kernels: the forward a gather (one thread per element of y), the
// backward one thread per column of the table adding dy's column token by token, which
// keeps the CPU's order of additions per element (no atomics: the same bits every run and
// on every backend). Rules in backend/embedding_math.h.

#include <cmath>

#include "backend/cuda/elementwise_map.cuh"
#include "backend/cuda/embedding_launch.h"
#include "backend/embedding_math.h"

namespace tandem::backend::cuda {
namespace {

template <typename T>
__global__ void embeddingKernel(const float* table, const int32_t* index, T* y, int64_t vocab,
                                int64_t width, int64_t n) {
  for (int64_t t = gridStart(); t < n; t += gridStride()) {
    const int64_t row = embeddingRow(index[t / width], vocab);
    store(y, t, row >= 0 ? table[row * width + t % width] : NAN);
  }
}

struct LoadAsFloat {
  template <typename T>
  __device__ float operator()(const T* p, int64_t i) const {
    return load(p, i);
  }
};

template <typename T>
__global__ void embeddingBackwardKernel(const T* dy, const int32_t* index, float* dtable,
                                        int64_t vocab, int64_t width, int64_t tokens) {
  for (int64_t c = gridStart(); c < width; c += gridStride()) {
    for (int64_t v = 0; v < vocab; ++v) dtable[v * width + c] = 0.0f;
    embeddingGradColumn(dy, index, tokens, vocab, width, c, dtable, LoadAsFloat{});
  }
}

template <typename T>
void embedding(const float* table, const int32_t* index, T* y, int64_t vocab, int64_t width,
               int64_t tokens, cudaStream_t stream) {
  const int64_t n = tokens * width;
  if (n <= 0) return;
  embeddingKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(table, index, y, vocab, width, n);
}

template <typename T>
void embeddingBackward(const T* dy, const int32_t* index, float* dtable, int64_t vocab,
                       int64_t width, int64_t tokens, cudaStream_t stream) {
  if (width <= 0 || vocab <= 0) return;
  embeddingBackwardKernel<<<mapBlocks(width), kMapThreads, 0, stream>>>(dy, index, dtable, vocab,
                                                                        width, tokens);
}

}  // namespace

void launchEmbedding(const float* table, const int32_t* index, float* y, int64_t vocab,
                     int64_t width, int64_t tokens, cudaStream_t stream) {
  embedding(table, index, y, vocab, width, tokens, stream);
}
void launchEmbedding(const float* table, const int32_t* index, uint16_t* y, int64_t vocab,
                     int64_t width, int64_t tokens, cudaStream_t stream) {
  embedding(table, index, y, vocab, width, tokens, stream);
}

void launchEmbeddingBackward(const float* dy, const int32_t* index, float* dtable, int64_t vocab,
                             int64_t width, int64_t tokens, cudaStream_t stream) {
  embeddingBackward(dy, index, dtable, vocab, width, tokens, stream);
}
void launchEmbeddingBackward(const uint16_t* dy, const int32_t* index, float* dtable, int64_t vocab,
                             int64_t width, int64_t tokens, cudaStream_t stream) {
  embeddingBackward(dy, index, dtable, vocab, width, tokens, stream);
}

}  // namespace tandem::backend::cuda
