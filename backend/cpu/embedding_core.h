#pragma once

// Embedding lookup forward and backward (nn.Embedding): loops of our own, as oneDNN has
// no gather. The table is an f32 variable [vocab, width]; the looked-up rows (y) and
// their gradient (dy) are f32 or bf16 (mixed precision: a bf16 y is the table's values
// rounded once); the table's gradient is f32, accumulated in f32 token by token in index
// order (backend/embedding_math.h), so it is the same bits on every run and backend.

#include <cstdint>

#include "backend/bf16.h"

namespace tandem::backend::cpu {

struct EmbeddingShape {
  int64_t vocab = 0, width = 0;  // the table
  int64_t tokens = 0;            // indices looked up (every dimension of the index tensor)
};

/// y[i, :] = table[index[i], :]. An index outside [0, vocab) throws std::out_of_range
/// naming the token and the index (before anything is written): a CPU kernel's
/// exceptions become its launch's Status.
void embeddingForward(const EmbeddingShape& s, const float* table, const int32_t* index, float* y);
void embeddingForward(const EmbeddingShape& s, const float* table, const int32_t* index, bf16* y);

/// dtable = 0, then dtable[index[i], :] += dy[i, :] for i = 0, 1, ... in order. Indices
/// are checked as in the forward pass.
void embeddingBackward(const EmbeddingShape& s, const float* dy, const int32_t* index,
                       float* dtable);
void embeddingBackward(const EmbeddingShape& s, const bf16* dy, const int32_t* index,
                       float* dtable);

}  // namespace tandem::backend::cpu
