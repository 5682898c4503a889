#pragma once

// What both backends' dropout kernels read from a dropout node: the mask's constants (the
// run's seed, mask_id, p; the step is @step's value, read where the kernel runs) and the
// device's rows: x's axis 0 from the node's sample_offset on (set by replicate: the index
// of the device's first row in the whole batch), the rest of x per row. The shape rule
// (ir/ops/elementwise_ops.cc) keeps them within the counter's words.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backend/dropout_mask.h"
#include "ir/op_views.h"

namespace tandem::backend {

struct DropoutRows {
  int64_t first = 0;    // index in the whole batch of the device's first row
  int64_t rows = 0;     // the device's rows (x's axis 0; one for a scalar)
  int64_t per_row = 0;  // elements per row
};

inline DropoutRows dropoutRowsOf(const ir::Node& node) {
  const ir::DropoutView v(node);
  const ir::TensorType& x = v.x()->type();
  const int64_t rows = x.rank() == 0 ? 1 : x.shape[0];
  return {
      .first = v.sample_offset(), .rows = rows, .per_row = rows == 0 ? 0 : x.numElements() / rows};
}

/// Whether the node's x (and y) is bf16; an error naming the node and `backend` ("CPU",
/// "CUDA") unless it is f32 or bf16, the dtypes both kernels take.
inline absl::StatusOr<bool> dropoutIsBf16(const ir::Node& node, absl::string_view backend) {
  const ir::DType t = ir::DropoutView(node).x()->type().dtype;
  if (t == ir::DType::kF32 || t == ir::DType::kBF16) return t == ir::DType::kBF16;
  return absl::UnimplementedError(absl::StrCat(
      node.describe(), ": the ", backend, " kernel supports f32 and bf16, not ", ir::dtypeName(t)));
}

/// The node's mask at step 0: a kernel sets `step` from @step each time it runs.
inline DropoutMask dropoutMaskOf(const ir::Node& node, uint64_t seed) {
  const ir::DropoutView v(node);
  return dropoutMask(seed, /*step=*/0, static_cast<uint32_t>(v.mask_id()), v.p());
}

}  // namespace tandem::backend
