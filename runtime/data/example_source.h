#pragma once

// Where a run's examples come from (issue 42): a count, the named fields of one example,
// and an example by its index, as host bytes. The batch loader reads a source example by
// example on its host threads and shards each global batch across devices and processes;
// a source knows nothing of batches, devices or models.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ir/types.h"

namespace tandem::runtime::data {

/// One field of an example: what the model input of the same name takes per example.
struct Field {
  std::string name;  // the model input it feeds ("x", "y", "tokens")
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;  // per example, no batch axis; empty: a scalar (a label)

  int64_t elements() const;
  int64_t bytes() const { return elements() * ir::dtypeBytes(dtype); }
  /// "x: f32[1,28,28]", "y: i32[]" (for messages).
  std::string text() const;
  bool operator==(const Field&) const = default;
};

/// The random key of one example in one epoch. Every random choice made for an example (a
/// source's window, a transform's crop or flip) is a pure function of its key, as dropout's
/// masks are of the step: the same run on 1 device, 2, 3:1 or under mpirun, on any number
/// of loader threads, and resumed mid-epoch, sees the same examples.
struct ExampleKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t position = 0;  // the example's place in the epoch's order (not its index)

  /// 64 random bits for choice `n` of kind `purpose` (a constant each user picks, such as
  /// kCropDraw): splitmix64 over the key, the purpose and n. Counter-based, so the draws
  /// are independent of the order in which threads make them.
  uint64_t bits(uint64_t purpose, uint64_t n = 0) const;
  /// An integer uniform in [0, bound) (bound >= 1), exact (rejection, as epochPermutation).
  uint64_t below(uint64_t bound, uint64_t purpose, uint64_t n = 0) const;
};

/// A source of examples. Implementations: Fashion-MNIST's IDX files, tensors a program
/// holds, NumPy files (memory-mapped), image folders, token and text files.
class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  /// What the source is, for messages: "npz:/data/digits.npz", "fashion-mnist:/usr/...".
  virtual std::string where() const = 0;
  /// Examples in one epoch.
  virtual int64_t size() const = 0;
  /// The fields of every example, in a fixed order.
  virtual const std::vector<Field>& fields() const = 0;
  /// Writes example `index` (0 <= index < size()) into `out`: out[f] points at
  /// fields()[f].bytes() bytes. `key` is the example's random key (sources that choose,
  /// such as random token windows, draw from it; others ignore it). Called from several
  /// loader threads at once. A bad example is an error naming the file and the example
  /// ("images:/data/train/cat/7.png: not a PNG or JPEG file").
  virtual absl::Status read(int64_t index, const ExampleKey& key,
                            absl::Span<void* const> out) const = 0;
  /// A classifier's labels: the name of the i32 field that holds class ids and their count
  /// (every label in [0, classes)); {"", 0} for a source without class labels.
  virtual std::pair<std::string, int64_t> classLabels() const { return {"", 0}; }
};

}  // namespace tandem::runtime::data
