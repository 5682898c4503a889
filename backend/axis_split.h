#pragma once

// A dense tensor seen as [outer, axis, inner] around one of its dimensions: what an op
// over an axis (softmax, a reduction) needs to know of its shape, on any backend. The
// struct is plain C++17, which nvcc compiles into the kernels (rows.cu); the rules that
// make one from an IR shape are host code.

#include <cstdint>

#include "backend/host_device.h"

#if !defined(__CUDACC__)
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/types.h"
#endif

namespace tandem::backend {

struct AxisSplit {
  int64_t outer = 1;  // product of the dimensions before the axis
  int64_t axis = 1;   // the axis' length
  int64_t inner = 1;  // product of the dimensions after it

  TANDEM_HD int64_t numElements() const { return outer * axis * inner; }
};

#if !defined(__CUDACC__)

/// `shape` split at dimension `axis` (negative counts from the end, as in PyTorch); an
/// error names `where`, `what` (the op) and the axis when the tensor has no such
/// dimension.
inline absl::StatusOr<AxisSplit> splitAtAxis(const ir::Shape& shape, int64_t axis,
                                             absl::string_view where, absl::string_view what) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", what, " axis ", axis, " is outside a rank-", rank, " tensor"));
  AxisSplit s;
  s.axis = shape[static_cast<size_t>(a)];
  for (int64_t i = 0; i < a; ++i) s.outer *= shape[static_cast<size_t>(i)];
  for (int64_t i = a + 1; i < rank; ++i) s.inner *= shape[static_cast<size_t>(i)];
  return s;
}

/// An error naming `where` and `what` when a dimension of `s` is empty.
inline absl::Status checkNotEmpty(const AxisSplit& s, absl::string_view where,
                                  absl::string_view what) {
  if (s.outer >= 1 && s.axis >= 1 && s.inner >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what, " over [", s.outer, ", ",
                                                 s.axis, ", ", s.inner,
                                                 "] (outer, axis, inner): a dimension is empty"));
}

#endif  // !defined(__CUDACC__)

}  // namespace tandem::backend
