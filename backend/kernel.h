#pragma once

#include "absl/types/span.h"
#include "backend/tensor_view.h"

namespace tandem::backend {

/// The compiled form of one IR node on one device. A kernel is created once, when the
/// executor loads a module (oneDNN primitives, cuDNN descriptors and workspace sizes are
/// made then), and run every step on its device's compute stream.
class Kernel {
 public:
  virtual ~Kernel() = default;

  /// Runs the node. `in` are its operands and `out` its results, in the node's order.
  /// Stateful ops (batch_norm's running statistics, sgd_update, assign) write their state
  /// operands in place: those views point at variable storage.
  virtual void run(absl::Span<const TensorView> in, absl::Span<const TensorView> out) = 0;
};

}  // namespace tandem::backend
