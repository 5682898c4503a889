#pragma once

// NumPy arrays as a source: .npy files, and .npz archives of them. A file is mapped
// (mapped_file.h) for its header and an .npz's directory, and its examples are read from
// where they lie in the file, an .npz entry that is stored (as numpy.savez writes it) in
// place; so only the examples being read are in memory, whatever the file's size. A
// deflated entry (numpy.savez_compressed) cannot be read in place: it is inflated into
// memory with zlib when the source opens. Example i is row i of every array; each array's
// first axis counts the examples.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/example_source.h"
#include "runtime/data/mapped_file.h"
#include "runtime/data/npy_format.h"

namespace tandem::runtime::data {

/// Which array feeds which field: in an .npz, `array` is an entry's name without ".npy";
/// for .npy files it is the file's path.
struct ArrayBinding {
  std::string field;
  std::string array;
  bool operator==(const ArrayBinding&) const = default;
};

struct NumpyOptions {
  /// > 0: class labels (see NumpySource) are checked to be below it, and it is their count.
  int64_t classes = 0;
};

/// Fields take the arrays' per-example shapes (the shape after the first axis) and are read
/// as f32 (float arrays: f2, f4, f8) or i32 (bool and integer arrays), converted at read
/// time; a value that does not fit is an error naming the file, the array and the example.
/// A field named "y" holding one integer per example (its array [count] or [count, 1]) is a
/// classifier's labels, field shape [] (a scalar): checked
/// when the source is opened (one pass over them) to be >= 0 (and below
/// NumpyOptions::classes when given); their count is classes, else the largest + 1.
class NumpySource : public ExampleSource {
 public:
  /// An .npz archive. Empty `bindings`: the arrays named x and y when the archive holds
  /// both (a classifier's examples and labels), else every array, each a field of its own
  /// name, in the archive's order.
  static absl::StatusOr<std::unique_ptr<NumpySource>> openNpz(
      const std::string& path, std::vector<ArrayBinding> bindings = {},
      const NumpyOptions& options = {});
  /// .npy files, one per field (ArrayBinding::array is the file).
  static absl::StatusOr<std::unique_ptr<NumpySource>> openNpy(std::vector<ArrayBinding> bindings,
                                                              const NumpyOptions& options = {});
  ~NumpySource() override;

  std::string where() const override { return where_; }
  int64_t size() const override { return count_; }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;
  std::pair<std::string, int64_t> classLabels() const override { return class_labels_; }

  struct Column;

 private:
  NumpySource() = default;
  absl::Status finish(const std::string& prefix, const NumpyOptions& options);

  std::string where_;
  std::string prefix_;  // what messages start with: "npz file 'PATH': " or ""
  int64_t count_ = 0;
  std::vector<Column> columns_;
  std::vector<Field> fields_;
  std::pair<std::string, int64_t> class_labels_;
};

}  // namespace tandem::runtime::data
