#pragma once

// Examples a program holds in memory: named arrays, each [count, ...] of one dtype.

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/types.h"
#include "runtime/data/example_source.h"

namespace tandem::runtime::data {

/// One array of examples: [count, per-example shape...] of `dtype`, row-major.
struct HostArray {
  std::string name;  // the field it becomes
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;        // the first axis counts the examples
  std::shared_ptr<const void> data;  // `bytes` bytes; shared, so that no copy is needed
  int64_t bytes = 0;

  /// Takes `values` (float: f32, int32_t: i32, double: f64) without copying them.
  template <typename T>
  static HostArray of(std::string name, std::vector<T> values, std::vector<int64_t> shape);
};

/// The arrays of a program as a source: example i is row i of every array.
class MemorySource : public ExampleSource {
 public:
  /// Errors name the array at fault: none given, a scalar (no example axis), bytes that do
  /// not match the shape, two arrays that disagree in count, a duplicate name. When
  /// `class_labels` names a field (an i32 array [count]), every label is checked to be in
  /// [0, class_labels.second).
  static absl::StatusOr<std::unique_ptr<MemorySource>> create(
      std::vector<HostArray> arrays, std::string where = "memory",
      std::pair<std::string, int64_t> class_labels = {"", 0});

  std::string where() const override { return where_; }
  int64_t size() const override { return count_; }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;
  std::pair<std::string, int64_t> classLabels() const override { return class_labels_; }

 private:
  MemorySource() = default;
  std::string where_;
  int64_t count_ = 0;
  std::vector<HostArray> arrays_;
  std::vector<Field> fields_;
  std::pair<std::string, int64_t> class_labels_;
};

template <typename T>
HostArray HostArray::of(std::string name, std::vector<T> values, std::vector<int64_t> shape) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t> ||
                    std::is_same_v<T, int64_t> || std::is_same_v<T, double>,
                "HostArray::of takes float, int32_t, int64_t or double values");
  constexpr ir::DType dtype = std::is_same_v<T, float>     ? ir::DType::kF32
                              : std::is_same_v<T, int32_t> ? ir::DType::kI32
                              : std::is_same_v<T, int64_t> ? ir::DType::kI64
                                                           : ir::DType::kF64;
  const int64_t bytes = static_cast<int64_t>(values.size() * sizeof(T));
  auto owned = std::make_shared<std::vector<T>>(std::move(values));
  // The aliasing constructor: the pointer is the elements, the owner the vector.
  std::shared_ptr<const void> data(owned, owned->data());
  return {std::move(name), dtype, std::move(shape), std::move(data), bytes};
}

}  // namespace tandem::runtime::data
