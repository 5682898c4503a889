#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/tensor_view.h"

namespace tandem::runtime {

/// A 64-byte aligned, zero-filled block of host memory (arenas, variable storage,
/// staging buffers, values copied back to the host).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t bytes) {
    size_t n = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
    data_.reset(static_cast<char*>(std::aligned_alloc(64, n)));
    std::memset(data_.get(), 0, n);
    bytes_ = bytes;
  }
  char* data() const { return data_.get(); }
  int64_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  int64_t bytes_ = 0;
};

/// A tensor the host owns: a type and its bytes.
struct HostTensor {
  ir::TensorType type;
  AlignedBuffer buffer;

  explicit HostTensor(ir::TensorType t) : type(std::move(t)), buffer(type.bytes()) {}
  backend::TensorView view() const { return {buffer.data(), type}; }
  const float* f32() const { return reinterpret_cast<const float*>(buffer.data()); }
  const int32_t* i32() const { return reinterpret_cast<const int32_t*>(buffer.data()); }
  /// The value of a scalar as a double, whatever its dtype.
  double scalar() const {
    return type.dtype == ir::DType::kI32 ? double(i32()[0]) : double(f32()[0]);
  }
};

}  // namespace tandem::runtime
