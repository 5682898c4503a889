#include "backend/cpu/copy_slice.h"

#include <cstring>

namespace tandem::backend::cpu {

void copySlice(const TensorView& whole, const TensorView& part, int axis, int64_t offset,
               bool into_whole) {
  const auto& ws = whole.type.shape;
  int64_t outer = 1, inner = ir::dtypeBytes(whole.type.dtype);
  for (int i = 0; i < axis; ++i) outer *= ws[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < ws.size(); ++i) inner *= ws[i];
  const int64_t whole_rows = ws[static_cast<size_t>(axis)], part_rows = part.dim(axis);
  auto* w = static_cast<char*>(whole.data);
  auto* p = static_cast<char*>(part.data);
  for (int64_t o = 0; o < outer; ++o) {
    char* wrow = w + (o * whole_rows + offset) * inner;
    char* prow = p + o * part_rows * inner;
    size_t bytes = static_cast<size_t>(part_rows * inner);
    if (into_whole) {
      std::memcpy(wrow, prow, bytes);
    } else {
      std::memcpy(prow, wrow, bytes);
    }
  }
}

}  // namespace tandem::backend::cpu
