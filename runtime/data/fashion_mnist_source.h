#pragma once

// Fashion-MNIST (today's default data) as a source: fields x: f32[1,28,28] and y: i32[].

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/data/example_source.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/idx_reader.h"

namespace tandem::runtime::data {

/// A Dataset read from IDX files (readIdxPair, loadFashionMnist) as a source. Fields
/// x: f32[channels,rows,cols] and y: i32[]; class labels {"y", data.classes}.
class FashionMnistSource : public ExampleSource {
 public:
  /// `dir`: where the files came from ("fashion-mnist:DIR" is where()).
  FashionMnistSource(std::shared_ptr<const Dataset> data, std::string dir);
  /// loadFashionMnist(dir, split, limit, dir_setting) as a source.
  static absl::StatusOr<std::unique_ptr<FashionMnistSource>> open(
      const std::string& dir, Split split, int64_t limit = 0,
      absl::string_view dir_setting = "data");

  const Dataset& dataset() const { return *data_; }
  std::string where() const override;
  int64_t size() const override { return data_->count; }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;
  std::pair<std::string, int64_t> classLabels() const override { return {"y", data_->classes}; }

 private:
  std::shared_ptr<const Dataset> data_;
  std::string dir_;
  std::vector<Field> fields_;
};

}  // namespace tandem::runtime::data
