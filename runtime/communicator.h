#pragma once

#include "absl/types/span.h"
#include "backend/tensor_view.h"

namespace tandem::runtime {

using backend::TensorView;

enum class ReduceOp : uint8_t { kSum, kMean, kMax };

/// Collective communication among the ranks (devices) of one step, behind one interface
/// so that in-process threads, NCCL and MPI are interchangeable. Every rank calls the same
/// collectives in the same order, each from its own comm stream; a call returns when this
/// rank's part is done and nothing of this rank's inputs is still being read.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;

  /// Reduces `in` (k tensors) elementwise across ranks into `out` (k tensors of the same
  /// types) on every rank. `out` may alias `in`.
  virtual void allReduce(int rank, absl::Span<const TensorView> in,
                         absl::Span<const TensorView> out, ReduceOp op) = 0;
  /// Copies `root`'s `in` into every rank's `out` (`in` is ignored on other ranks).
  virtual void broadcast(int rank, int root, const TensorView& in, const TensorView& out) = 0;
  /// Joins every rank's `in` along `axis` (in rank order) into `out` on `root` (`out` is
  /// ignored on other ranks).
  virtual void gather(int rank, int root, const TensorView& in, const TensorView& out,
                      int axis) = 0;
};

/// Copies slice `[offset, offset + part.dim(axis))` of `whole` along `axis` into `part`
/// (split_and_load), or back when `into_whole`. Row-major, any axis.
void copySlice(const TensorView& whole, const TensorView& part, int axis, int64_t offset,
               bool into_whole);

}  // namespace tandem::runtime
