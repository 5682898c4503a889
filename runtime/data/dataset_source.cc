#include "runtime/data/dataset_source.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {

DatasetSource::DatasetSource(std::shared_ptr<const Dataset> data, std::string where)
    : data_(std::move(data)),
      where_(where.empty() ? data_->source : std::move(where)),
      fields_{{.name = "x", .dtype = ir::DType::kF32, .shape = data_->exampleShape()},
              {.name = "y", .dtype = ir::DType::kI32, .shape = {}}} {}

absl::StatusOr<std::unique_ptr<DatasetSource>> DatasetSource::openFashionMnist(
    const std::string& dir, Split split, int64_t limit, absl::string_view dir_setting) {
  absl::StatusOr<Dataset> data = loadFashionMnist(dir, split, limit, dir_setting);
  if (!data.ok()) return data.status();
  // Named by its images file (which half, and where), as the messages always named it.
  return std::make_unique<DatasetSource>(std::make_shared<const Dataset>(*std::move(data)));
}

absl::Status DatasetSource::read(int64_t index, const ExampleKey&,
                                 absl::Span<void* const> out) const {
  if (index < 0 || index >= data_->count)
    return absl::OutOfRangeError(
        absl::StrCat(where_, ": example ", index, " is beyond its ", data_->count, " examples"));
  const int64_t size = data_->exampleSize();
  std::memcpy(out[0], data_->images.data() + index * size, sizeof(float) * size);
  std::memcpy(out[1], &data_->labels[static_cast<size_t>(index)], sizeof(int32_t));
  return absl::OkStatus();
}

}  // namespace tandem::runtime::data
