#pragma once

// NumPy's .npy format (versions 1, 2 and 3): a header that is a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (1797, 1, 8, 8), } after a magic
// string, then the array's bytes. And the conversion of its element types to the IR's.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/types.h"

namespace tandem::runtime::data {

/// A NumPy element type the sources read: little-endian bool, signed and unsigned integers
/// of 1, 2, 4, 8 bytes, floats of 2, 4, 8 bytes.
struct NpyDType {
  char kind = 'f';  // 'b' bool, 'i' signed, 'u' unsigned, 'f' float
  int bytes = 4;
  /// numpy's name: "<f4", "|u1", "|b1".
  std::string descr;

  /// The IR dtype it is read as: floats as f32, integers and bool as i32 (the IR has no
  /// narrower or wider integer, nor f16).
  ir::DType irType() const { return kind == 'f' ? ir::DType::kF32 : ir::DType::kI32; }
};

/// A parsed .npy header: the array's element type, shape, and where its bytes start.
struct NpyHeader {
  NpyDType dtype;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;
  int64_t dataBytes() const;  // product(shape) * dtype.bytes
};

/// Parses the header at the start of `file` (the whole .npy file, or an .npz entry's
/// bytes) and checks that the array's bytes are all there. Errors (without the file's
/// name, which the caller puts in front): "not a .npy file (no \x93NUMPY magic)", "corrupt
/// .npy header: ...", "unsupported .npy format version 4.0", "big-endian array (>f4):
/// only little-endian arrays are read", "Fortran-order array: only C order is read
/// (numpy.ascontiguousarray)", "array of Python objects (|O)", "truncated array data: the
/// file holds N bytes of it, shape (...) of <f4 needs M".
absl::StatusOr<NpyHeader> parseNpyHeader(absl::string_view file);

/// The header of a version 1.0 .npy file of a C-order little-endian array of `dtype` (f32:
/// <f4, i32: <i4, f64: <f8) and `shape`, padded as numpy pads it (the array's bytes start
/// at a multiple of 64): write it, then the array's bytes. numpy.load reads the file. An
/// error for a dtype numpy has no type for (bf16).
absl::StatusOr<std::string> npyFileHeader(ir::DType dtype, const std::vector<int64_t>& shape);

/// A value that does not fit the IR type it is converted to.
struct NpyRangeError {
  int64_t element = -1;  // index of the first such element, -1: none
  std::string value;     // its value, as text
};

/// Converts `count` elements of `from` at `src` (any alignment) to `from.irType()` at
/// `dst`: integers beyond i32's range and finite floats beyond f32's are refused (the
/// first is returned; the elements after it are not written).
NpyRangeError convertNpyElements(const NpyDType& from, const char* src, int64_t count, void* dst);

/// The elements as int64 (integer and bool arrays only), for a pass over labels.
int64_t npyElementAsInt64(const NpyDType& from, const char* src);

}  // namespace tandem::runtime::data
