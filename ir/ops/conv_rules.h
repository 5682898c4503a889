#pragma once

// What the convolution family shares with the fused ops built on it (fused_ops.cc).

#include "absl/status/statusor.h"
#include "ir/grad.h"
#include "ir/ir.h"

namespace tandem::ir {

/// Checks x, w (and the bias, when given) of a convolution with `stride` and `pad` and
/// returns its output type.
absl::StatusOr<TensorType> convOutput(const Node& n, size_t x, size_t w, const Value* bias,
                                      int64_t stride, int64_t pad);

/// The gradient of a convolution over operands x, w, b? from its result 0's gradient:
/// conv2d_backward_data and conv2d_backward_filter (which also gives the bias's).
absl::Status gradConv2d(GradContext& c, int64_t stride, int64_t pad);

}  // namespace tandem::ir
