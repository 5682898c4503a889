#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backend/stream.h"
#include "backend/tensor_view.h"

namespace tandem::backend {

/// The compiled form of one IR node on one device. A kernel is made once, when the
/// executor loads a module (oneDNN primitives, cuDNN descriptors and workspace sizes are
/// made then, outside any stream), and launched every step.
class Kernel {
 public:
  virtual ~Kernel() = default;

  /// Enqueues the node's work on `stream` (its device's compute stream) and returns
  /// without waiting for it. `in` are its operands and `out` its results, in the node's
  /// order; the views must stay valid until the stream has run the work. Stateful ops
  /// (batch_norm's running statistics, sgd_update, assign) write their state operands in
  /// place: those views point at variable storage. A launch that fails is returned here;
  /// a failure while the work runs comes back from Stream::synchronize.
  virtual absl::Status launch(Stream& stream, absl::Span<const TensorView> in,
                              absl::Span<const TensorView> out) = 0;
};

}  // namespace tandem::backend
