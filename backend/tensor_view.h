#pragma once

#include <cstdint>

#include "ir/types.h"

namespace tandem::backend {

/// A tensor in a device's memory: a pointer and its IR type (dense, row-major; images
/// NCHW, filters OIHW). Kernels and communicators see only views; the runtime owns the
/// memory (per-device arenas and variable storage).
struct TensorView {
  void* data = nullptr;
  ir::TensorType type;

  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
  int64_t numElements() const { return type.numElements(); }
  int64_t bytes() const { return type.bytes(); }
  int64_t dim(int i) const { return type.shape[static_cast<size_t>(i)]; }
};

}  // namespace tandem::backend
