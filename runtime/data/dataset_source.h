#pragma once

// A labelled image set held in memory (Dataset: Fashion-MNIST's IDX files, the API's
// Examples) as a source of examples: fields `x` (f32 [C, H, W]) and `y` (i32 class id).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/data/example_source.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/idx_reader.h"

namespace tandem::runtime::data {

class DatasetSource final : public ExampleSource {
 public:
  /// `where` names the source in messages; empty: the images' file (Dataset::source).
  explicit DatasetSource(std::shared_ptr<const Dataset> data, std::string where = "");
  /// One half of Fashion-MNIST's files in `dir` (loadFashionMnist), named by its images
  /// file.
  static absl::StatusOr<std::unique_ptr<DatasetSource>> openFashionMnist(
      const std::string& dir, Split split, int64_t limit = 0,
      absl::string_view dir_setting = "data");

  const Dataset& dataset() const { return *data_; }
  std::string where() const override { return where_; }
  int64_t size() const override { return data_->count; }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;
  std::pair<std::string, int64_t> classLabels() const override { return {"y", data_->classes}; }

 private:
  std::shared_ptr<const Dataset> data_;
  std::string where_;
  std::vector<Field> fields_;
};

}  // namespace tandem::runtime::data
