#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backend/stream.h"
#include "backend/tensor_view.h"
#include "ir/op_enum.h"

namespace tandem::backend {

/// How all_reduce combines: the op spec's ReduceOp enum (ir/ops.td), used as is.
using ReduceOp = ir::ReduceOp;

/// One rank's end of a group of devices that run collectives together (an NCCL
/// communicator, an MPI communicator, or threads of this process). Calls enqueue the
/// collective on the stream given (the rank's comm stream) and return, as NCCL's do;
/// every rank of the group calls the same collectives in the same order. Views must stay
/// valid until the stream has run the collective.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Reduces `in` (k tensors) elementwise across the ranks into `out` (k tensors of the
  /// same types) on every rank. `out` may alias `in`.
  virtual absl::Status allReduce(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                                 ReduceOp op, Stream& stream) = 0;
  /// Reduces `in`, a 1-D buffer of the same type on every rank, elementwise across the
  /// ranks and writes rank r's shard of the result into its `out`: elements [sizes[0] +
  /// ... + sizes[r-1], + sizes[r]), sizes[r] >= 1 per rank, adding up to `in`'s length
  /// (shards may be uneven). Each element is reduced exactly as allReduce reduces it, so a
  /// shard is the same bits as that slice of allReduce's result, on the same communicator.
  virtual absl::Status reduceScatter(const TensorView& in, const TensorView& out,
                                     absl::Span<const int64_t> sizes, ReduceOp op,
                                     Stream& stream) = 0;
  /// The inverse: every rank's `in` (sizes[r] elements on rank r) concatenated in rank
  /// order into every rank's `out` (the sum of sizes).
  virtual absl::Status allGather(const TensorView& in, const TensorView& out,
                                 absl::Span<const int64_t> sizes, Stream& stream) = 0;
  /// Copies `root`'s `in` into every rank's `out` (`in` is ignored on other ranks).
  virtual absl::Status broadcast(int root, const TensorView& in, const TensorView& out,
                                 Stream& stream) = 0;
  /// What the collective this rank enqueues next is ("all_reduce %g.sum.0 (bucket 3)"),
  /// for the line a rank prints when it waits in it too long (processes.h); a
  /// communicator that cannot wait on another process ignores it.
  virtual void labelNext(std::string label) { (void)label; }
};

/// The communicators of one group of devices, made together (ncclCommInitAll,
/// MPI_Comm_split). One host thread driving several ranks brackets the calls of one
/// collective with groupStart/groupEnd, as NCCL requires of a process that drives several
/// GPUs (else the first rank's call would wait for the others, which are not yet issued).
class CommunicatorGroup {
 public:
  virtual ~CommunicatorGroup() = default;
  virtual int size() const = 0;
  virtual Communicator& rank(int r) = 0;
  virtual absl::Status groupStart() = 0;
  virtual absl::Status groupEnd() = 0;
};

}  // namespace tandem::backend
