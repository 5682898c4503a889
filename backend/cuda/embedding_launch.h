#pragma once

// Embedding lookup's own kernels (embedding.cu), enqueued on `stream`; callers check
// cudaGetLastError. The table is f32 [vocab, width]; y and dy f32 or bf16 (uint16_t bits).
// Indices outside the table cannot stop a kernel: the forward writes NaN rows for them and
// the backward skips them (the CPU core throws; a NaN loss stops training either way).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::backend::cuda {

/// y[i, :] = table[index[i], :] for i < tokens.
void launchEmbedding(const float* table, const int32_t* index, float* y, int64_t vocab,
                     int64_t width, int64_t tokens, cudaStream_t stream);
void launchEmbedding(const float* table, const int32_t* index, uint16_t* y, int64_t vocab,
                     int64_t width, int64_t tokens, cudaStream_t stream);

/// dtable = 0, then dy's rows added token by token in index order: one thread per column
/// (embeddingGradColumn), so each element gets the CPU's additions in the CPU's order.
void launchEmbeddingBackward(const float* dy, const int32_t* index, float* dtable, int64_t vocab,
                             int64_t width, int64_t tokens, cudaStream_t stream);
void launchEmbeddingBackward(const uint16_t* dy, const int32_t* index, float* dtable, int64_t vocab,
                             int64_t width, int64_t tokens, cudaStream_t stream);

}  // namespace tandem::backend::cuda
