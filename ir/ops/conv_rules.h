#pragma once

// What the convolution family shares with the fused ops built on it (fused_ops.cc).

#include "absl/status/statusor.h"
#include "ir/grad.h"
#include "ir/ir.h"

namespace tandem::ir {

/// Checks x, w (and the bias, when given) of convolution node `n` (its stride, pad and
/// groups) and returns its output type.
absl::StatusOr<TensorType> convOutput(const Node& n, size_t x, size_t w, const Value* bias);

/// The gradient of a convolution over operands x, w, b? from its result 0's gradient:
/// conv2d_backward_data and conv2d_backward_filter (which also gives the bias's), with the
/// node's stride, pad and groups.
absl::Status gradConv2d(GradContext& c);

}  // namespace tandem::ir
