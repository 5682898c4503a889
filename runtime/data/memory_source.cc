#include "runtime/data/memory_source.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::runtime::data {

absl::StatusOr<std::unique_ptr<MemorySource>> MemorySource::create(
    std::vector<HostArray> arrays, std::string where,
    std::pair<std::string, int64_t> class_labels) {
  if (arrays.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": no arrays"));
  std::unique_ptr<MemorySource> source(new MemorySource());
  std::set<std::string> names;
  for (const HostArray& a : arrays) {
    if (!names.insert(a.name).second)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": two arrays are named '", a.name, "'"));
    if (a.shape.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": array '", a.name, "' is a scalar, not examples along a first axis"));
    Field field{a.name, a.dtype, std::vector<int64_t>(a.shape.begin() + 1, a.shape.end())};
    for (int64_t d : a.shape)
      if (d < 0)
        return absl::InvalidArgumentError(absl::StrCat(where, ": array '", a.name,
                                                       "' has a negative extent in its shape [",
                                                       absl::StrJoin(a.shape, ","), "]"));
    if (a.shape[0] * field.bytes() != a.bytes || (a.bytes > 0 && a.data == nullptr))
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": array '", a.name, "' holds ", a.bytes, " bytes, but its shape [",
                       absl::StrJoin(a.shape, ","), "] of ", ir::dtypeName(a.dtype), " needs ",
                       a.shape[0] * field.bytes()));
    if (a.shape[0] != arrays[0].shape[0])
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": arrays '", arrays[0].name, "' and '", a.name,
          "' disagree in length: ", arrays[0].shape[0], " and ", a.shape[0], " examples"));
    source->fields_.push_back(std::move(field));
  }
  source->count_ = arrays[0].shape[0];
  if (!class_labels.first.empty()) {
    const HostArray* labels = nullptr;
    for (const HostArray& a : arrays)
      if (a.name == class_labels.first) labels = &a;
    if (labels == nullptr || labels->dtype != ir::DType::kI32 || labels->shape.size() != 1)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the class labels '", class_labels.first, "' are not an i32 array [count]"));
    const auto* y = static_cast<const int32_t*>(labels->data.get());
    for (int64_t i = 0; i < source->count_; ++i)
      if (y[i] < 0 || y[i] >= class_labels.second)
        return absl::InvalidArgumentError(absl::StrCat(where, ": label ", y[i], " of example ", i,
                                                       " is out of range [0, ", class_labels.second,
                                                       ")"));
  }
  source->where_ = std::move(where);
  source->arrays_ = std::move(arrays);
  source->class_labels_ = std::move(class_labels);
  return source;
}

absl::Status MemorySource::read(int64_t index, const ExampleKey&,
                                absl::Span<void* const> out) const {
  if (index < 0 || index >= count_)
    return absl::OutOfRangeError(
        absl::StrCat(where_, ": example ", index, " is beyond its ", count_, " examples"));
  for (size_t f = 0; f < arrays_.size(); ++f) {
    const int64_t bytes = fields_[f].bytes();
    std::memcpy(out[f], static_cast<const char*>(arrays_[f].data.get()) + index * bytes,
                static_cast<size_t>(bytes));
  }
  return absl::OkStatus();
}

}  // namespace tandem::runtime::data
