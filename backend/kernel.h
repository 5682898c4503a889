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

  /// Hands the kernel its workspace: the bytes of its device's arena the plan gives the
  /// node (`plan{workspace=[OFFSET, BYTES]}`), once, by the loader, after the kernel is made
  /// and before its first launch. The kernel uses them instead of allocating, so nothing
  /// allocates once a step may be recorded; a need beyond them (known once the kernel has
  /// chosen its algorithm) is an error naming the node. Kernels that need none ignore it.
  virtual absl::Status bindWorkspace(const TensorView& workspace) {
    (void)workspace;
    return absl::OkStatus();
  }
};

}  // namespace tandem::backend
