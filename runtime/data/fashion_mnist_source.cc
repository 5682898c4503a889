#include "runtime/data/fashion_mnist_source.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {

FashionMnistSource::FashionMnistSource(std::shared_ptr<const Dataset> data, std::string dir)
    : data_(std::move(data)), dir_(std::move(dir)) {
  fields_ = {Field{"x", ir::DType::kF32, data_->exampleShape()}, Field{"y", ir::DType::kI32, {}}};
}

absl::StatusOr<std::unique_ptr<FashionMnistSource>> FashionMnistSource::open(
    const std::string& dir, Split split, int64_t limit, absl::string_view dir_setting) {
  absl::StatusOr<Dataset> data = loadFashionMnist(dir, split, limit, dir_setting);
  if (!data.ok()) return data.status();
  return std::make_unique<FashionMnistSource>(std::make_shared<const Dataset>(*std::move(data)),
                                              dir);
}

std::string FashionMnistSource::where() const { return absl::StrCat("fashion-mnist:", dir_); }

absl::Status FashionMnistSource::read(int64_t index, const ExampleKey&,
                                      absl::Span<void* const> out) const {
  if (index < 0 || index >= data_->count)
    return absl::OutOfRangeError(
        absl::StrCat(where(), ": example ", index, " is beyond its ", data_->count, " examples"));
  const int64_t n = data_->exampleSize();
  std::memcpy(out[0], data_->images.data() + index * n, static_cast<size_t>(n) * sizeof(float));
  std::memcpy(out[1], &data_->labels[static_cast<size_t>(index)], sizeof(int32_t));
  return absl::OkStatus();
}

}  // namespace tandem::runtime::data
