#pragma once

// Batches of a source of examples for training and evaluation: seeded shuffling, static
// batch shape with padding, and a background thread that prepares batches ahead of the
// trainer.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/data/dataset_source.h"
#include "runtime/data/example_source.h"
#include "runtime/data/worker_pool.h"

namespace tandem::runtime::data {

/// One batch: `batch` rows of every field of the source, always (the graph's static
/// shape); rows >= valid are padding: zero bytes, and -1 in a classifier's labels (the loss
/// and accuracy kernels ignore negative labels).
struct Batch {
  absl::Span<const void* const> fields;  // [batch, field's shape...] each, the source's order
  int64_t valid;                         // rows [0, valid) are real examples
  int64_t index;                         // batch number within the epoch

  /// Field `f`'s rows as elements of its dtype.
  template <class T>
  const T* field(size_t f) const {
    return static_cast<const T*>(fields[f]);
  }
};

/// The permutation of [0, n) used for `epoch` of a loader seeded with `seed`. It is the
/// same on every platform and standard library: a Fisher–Yates shuffle written out here
/// (for i = n-1 down to 1, swap i with j uniform in [0, i]) over std::mt19937_64, whose
/// output sequence the C++ standard fixes, seeded with splitmix64(seed ^ splitmix64(epoch)).
/// j is r % (i+1) for the first 64-bit output r not below 2^64 mod (i+1) (rejection), so it
/// is exactly uniform.
/// std::shuffle and std::uniform_int_distribution are not used: their outputs are
/// implementation-defined.
std::vector<int64_t> epochPermutation(int64_t n, uint64_t seed, int epoch);

/// Hands out the batches of an ExampleSource, one epoch at a time. The source must outlive
/// the loader. Single consumer: next() and startEpoch() are called from one thread.
class BatchLoader {
 public:
  /// Shuffles every epoch with a generator seeded by (seed, epoch) when `shuffle` (see
  /// epochPermutation); otherwise examples come in file order. `drop_last` drops a final
  /// partial batch (training) instead of padding it (evaluation). A background thread
  /// prepares up to `prefetch` batches ahead (at least 1), copying rows into batch buffers
  /// it owns, each batch's rows read by it and up to 3 helpers (one per core), all below
  /// the devices' priority (worker_pool.h); example i of an epoch's order is read with key
  /// (seed, epoch, i), whichever thread reads it. `batch` must be positive.
  BatchLoader(const ExampleSource& data, int64_t batch, bool shuffle, uint64_t seed, bool drop_last,
              int prefetch = 2);
  /// The same over a labelled image set held in memory (fields `x` and `y`).
  BatchLoader(const Dataset& data, int64_t batch, bool shuffle, uint64_t seed, bool drop_last,
              int prefetch = 2);
  /// The loader keeps a reference to the data: a temporary would dangle.
  BatchLoader(Dataset&&, int64_t, bool, uint64_t, bool, int = 2) = delete;
  /// Stops the thread cleanly, also mid-epoch.
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  /// Batches in one epoch: count / batch with drop_last, else rounded up.
  int64_t batchesPerEpoch() const;
  /// The source, and the rows of every batch.
  const ExampleSource& data() const { return data_; }
  int64_t batch() const { return batch_; }
  /// Whether a last partial batch is dropped (training) rather than padded (evaluation).
  bool dropsLast() const { return drop_last_; }
  /// Starts (or restarts) epoch `epoch`: the batches of any epoch in progress are dropped
  /// and earlier Batch pointers become invalid. `first_batch` skips that many batches of
  /// the epoch's order without preparing them (a run resumed inside the epoch).
  void startEpoch(int epoch, int64_t first_batch = 0);
  /// Fills only rows [first, end) of every batch (the others stay zero images with label
  /// -1): one process's share of the global batch in a multi-process run, like PyTorch's
  /// DistributedSampler, except that every rank keeps the same shuffled order (from the
  /// seed) and takes its rows of each batch, so the processes together see exactly the
  /// batches of one process. `valid` stays the whole batch's. Call before startEpoch.
  void setRows(int64_t first, int64_t end);
  /// Next batch of the epoch, or nullopt at its end (and before the first startEpoch), or
  /// when an example could not be read: status() then says which. The returned pointers
  /// stay valid until the next call to next() or startEpoch().
  std::optional<Batch> next();
  /// The first example the source could not read in this epoch (OK when none).
  absl::Status status() const;

 private:
  struct Slot {
    std::vector<std::vector<std::byte>> fields;  // one buffer per field: [batch, ...]
    std::vector<const void*> views;              // their data, what a Batch spans
    int64_t valid = 0;
    int64_t index = 0;
    absl::Status status;  // an example it could not read
  };

  BatchLoader(std::unique_ptr<const ExampleSource> owned, int64_t batch, bool shuffle,
              uint64_t seed, bool drop_last, int prefetch);
  void produce();
  /// Zero bytes in rows [first, end) of every field, -1 in a classifier's labels.
  void padRows(Slot& slot, int64_t first, int64_t end) const;
  void fill(Slot& slot, int epoch, int64_t index, const std::vector<int64_t>& order,
            int64_t row_first, int64_t row_end);

  std::unique_ptr<const ExampleSource> owned_;  // the Dataset constructor's source
  const ExampleSource& data_;
  std::vector<int64_t> field_bytes_;  // per example, by field
  int label_field_ = -1;              // a classifier's labels: padded with -1
  const int64_t batch_;
  const bool shuffle_;
  const uint64_t seed_;
  const bool drop_last_;

  mutable std::mutex mu_;
  std::condition_variable space_;  // the producer waits for a free slot or a new epoch
  std::condition_variable ready_;  // the consumer waits for a filled slot
  std::vector<Slot> slots_;        // a ring: prefetch slots plus the one the consumer holds
  // All below guarded by mu_. Filled slots are head_, head_+1, ... (filled_ of them); the
  // consumer's slot, when held_, is the one just before head_.
  size_t head_ = 0;
  size_t filled_ = 0;
  bool held_ = false;
  uint64_t generation_ = 0;  // bumped by startEpoch; 0 means no epoch started yet
  int epoch_ = 0;
  int64_t produced_ = 0;  // batches of this epoch put in the ring
  int64_t consumed_ = 0;  // batches of this epoch handed out
  bool stop_ = false;
  absl::Status status_;                   // the first example that could not be read this epoch
  int64_t row_first_ = 0, row_end_ = -1;  // setRows; -1: the whole batch

  WorkerPool readers_;  // the producer and its helpers read each batch's rows
  std::thread producer_;
};

}  // namespace tandem::runtime::data
