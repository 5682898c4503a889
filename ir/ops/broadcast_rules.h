#pragma once

// What the gradient rules of broadcasting ops share (ir/ops/broadcast_ops.cc).

#include <string>

#include "absl/status/statusor.h"
#include "ir/grad.h"
#include "ir/ir.h"

namespace tandem::ir {

/// `g` summed down to `target`, numpy's broadcast undone: reduce_sum over the leading axes
/// target lacks, and with keepdim over each axis where target is 1 and g is not; `g`
/// itself when it already has target's shape. The last node is named `name`.
absl::StatusOr<Value*> sumToShape(GradContext& c, Value* g, const Shape& target,
                                  const std::string& name);

}  // namespace tandem::ir
