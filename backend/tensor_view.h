#pragma once

#include <cstdint>
#include <string>

#include "ir/types.h"

namespace tandem::backend {

/// Where a block of memory lives: plain host memory, host memory pinned for fast device
/// copies (cudaMallocHost), or the memory of the module's device `device` (an index into
/// Module::devices()). CPU devices' memory is host memory, but it is still "device N":
/// the executor treats every kind alike.
struct MemoryLocation {
  enum class Space : uint8_t { kHost, kPinnedHost, kDevice };
  Space space = Space::kHost;
  int device = -1;  // with kDevice

  static MemoryLocation host() { return {Space::kHost, -1}; }
  static MemoryLocation pinnedHost() { return {Space::kPinnedHost, -1}; }
  static MemoryLocation onDevice(int d) { return {Space::kDevice, d}; }
  bool isHost() const { return space != Space::kDevice; }
  bool operator==(const MemoryLocation&) const = default;
};

/// "host", "pinned host" or "device 1".
std::string toString(const MemoryLocation& where);

/// A tensor in memory: a pointer, its IR type (dense, row-major; images NCHW, filters
/// OIHW) and where it lives. Kernels and communicators see only views; the runtime owns
/// the memory (per-device arenas, variable storage, staging buffers).
struct TensorView {
  void* data = nullptr;
  ir::TensorType type;
  MemoryLocation where;

  float* f32() const { return static_cast<float*>(data); }
  /// The data as elements of T (float, bf16, int32_t, double), for loops templated on it.
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
  int64_t numElements() const { return type.numElements(); }
  int64_t bytes() const { return type.bytes(); }
  int64_t dim(int i) const { return type.shape[static_cast<size_t>(i)]; }
};

}  // namespace tandem::backend
