#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

#include "runtime/communicator.h"

namespace tandem::runtime {

/// The ranks are threads of this process (one comm stream per device) sharing memory. A
/// collective is a rendezvous: every rank posts its buffers, the work is split by rank,
/// and a second barrier keeps any rank from leaving while others still touch its buffers.
/// Reductions add the ranks' values in rank order whatever the timing, so two runs with
/// the same inputs give bit-identical results, and every rank receives the same bits.
class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(int size);

  int size() const override { return size_; }
  void allReduce(int rank, absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                 ReduceOp op) override;
  void broadcast(int rank, int root, const TensorView& in, const TensorView& out) override;
  void gather(int rank, int root, const TensorView& in, const TensorView& out, int axis) override;

 private:
  struct Posted {
    absl::Span<const TensorView> in, out;
    const TensorView* one_in = nullptr;
    const TensorView* one_out = nullptr;
  };
  void arriveAndWait();

  int size_;
  std::vector<Posted> posted_;
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace tandem::runtime
