#include "backend/cpu/embedding_core.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "backend/cpu/vector_loops.h"
#include "backend/embedding_math.h"

namespace tandem::backend::cpu {
namespace {

void checkIndices(const EmbeddingShape& s, const int32_t* index) {
  for (int64_t i = 0; i < s.tokens; ++i)
    if (embeddingRow(index[i], s.vocab) < 0)
      throw std::out_of_range(absl::StrCat("embedding: token ", i, " has index ", index[i],
                                           ", outside the table's ", s.vocab, " rows"));
}

template <typename T>
TANDEM_VECTOR_LOOPS void copyRow(const float* from, T* to, int64_t width) {
  for (int64_t c = 0; c < width; ++c) to[c] = from[c];
}

template <typename T>
TANDEM_VECTOR_LOOPS void addRow(const T* from, float* to, int64_t width) {
  for (int64_t c = 0; c < width; ++c) to[c] += static_cast<float>(from[c]);
}

template <typename T>
void forward(const EmbeddingShape& s, const float* table, const int32_t* index, T* y) {
  checkIndices(s, index);
  for (int64_t i = 0; i < s.tokens; ++i)
    copyRow(table + static_cast<int64_t>(index[i]) * s.width, y + i * s.width, s.width);
}

// Tokens outer, columns inner: each element of dtable receives its additions in token
// order, as embeddingGradColumn (the CUDA kernel's loop) adds them.
template <typename T>
void backward(const EmbeddingShape& s, const T* dy, const int32_t* index, float* dtable) {
  checkIndices(s, index);
  std::memset(dtable, 0, static_cast<size_t>(s.vocab * s.width) * sizeof(float));
  for (int64_t i = 0; i < s.tokens; ++i)
    addRow(dy + i * s.width, dtable + static_cast<int64_t>(index[i]) * s.width, s.width);
}

}  // namespace

void embeddingForward(const EmbeddingShape& s, const float* table, const int32_t* index, float* y) {
  forward(s, table, index, y);
}
void embeddingForward(const EmbeddingShape& s, const float* table, const int32_t* index, bf16* y) {
  forward(s, table, index, y);
}
void embeddingBackward(const EmbeddingShape& s, const float* dy, const int32_t* index,
                       float* dtable) {
  backward(s, dy, index, dtable);
}
void embeddingBackward(const EmbeddingShape& s, const bf16* dy, const int32_t* index,
                       float* dtable) {
  backward(s, dy, index, dtable);
}

}  // namespace tandem::backend::cpu
