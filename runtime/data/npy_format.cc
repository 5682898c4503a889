#include "runtime/data/npy_format.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::runtime::data {
namespace {

constexpr absl::string_view kNpyMagic = "\x93NUMPY";

absl::Status corruptHeader(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("corrupt .npy header: ", why));
}

// A cursor over the header's dict literal: only the subset of Python literals numpy
// writes (strings, True/False, tuples of integers).
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool atEnd() {
    skipSpace();
    return pos_ >= text_.size();
  }
  char peek() {
    skipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  absl::StatusOr<std::string> string() {
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      return corruptHeader("expected a quoted string");
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return corruptHeader("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  absl::StatusOr<bool> boolean() {
    skipSpace();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.substr(pos_).substr(0, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    return corruptHeader("fortran_order is not True or False");
  }
  absl::StatusOr<std::vector<int64_t>> tuple() {
    if (!take('(')) return corruptHeader("shape is not a tuple");
    std::vector<int64_t> dims;
    while (!take(')')) {
      skipSpace();
      size_t end = pos_;
      while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
      int64_t d = 0;
      if (end == pos_ || !absl::SimpleAtoi(text_.substr(pos_, end - pos_), &d))
        return corruptHeader("shape holds something other than non-negative integers");
      dims.push_back(d);
      pos_ = end;
      take('L');  // Python 2's long integers
      if (!take(',') && peek() != ')') return corruptHeader("shape is not a tuple");
    }
    return dims;
  }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

absl::StatusOr<NpyDType> parseDescr(const std::string& descr) {
  if (descr.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat("unsupported element type '", descr, "'"));
  const char order = descr[0];
  const char kind = descr[1];
  if (kind == 'O')
    return absl::InvalidArgumentError(
        absl::StrCat("array of Python objects (", descr, "): only arrays of numbers are read"));
  int bytes = 0;
  if (!absl::SimpleAtoi(descr.substr(2), &bytes) ||
      std::string("biuf").find(kind) == std::string::npos ||
      std::string("<>|=").find(order) == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported element type '", descr,
        "' (bool, integers and floats are read: |b1, |u1, |i1, <i2, <u2, <i4, <u4, <i8, <u8, "
        "<f2, <f4, <f8)"));
  const bool valid =
      (kind == 'b' && bytes == 1) ||
      ((kind == 'i' || kind == 'u') && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) ||
      (kind == 'f' && (bytes == 2 || bytes == 4 || bytes == 8));
  if (!valid)
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported element type '", descr,
        "' (bool, integers and floats are read: |b1, |u1, |i1, <i2, <u2, <i4, <u4, <i8, <u8, "
        "<f2, <f4, <f8)"));
  if (order == '>' && bytes > 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "big-endian array (", descr,
        "): only little-endian arrays are read (numpy: a.astype(a.dtype.newbyteorder('<')))"));
  return NpyDType{kind, bytes, descr};
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  uint32_t bits;
  if (exponent == 31)
    bits = sign | 0x7f800000u | (mantissa << 13);
  else
    bits = sign | (static_cast<uint32_t>(exponent - 15 + 127) << 23) | (mantissa << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
T npyLoad(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

int64_t NpyHeader::dataBytes() const {
  int64_t n = dtype.bytes;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<NpyHeader> parseNpyHeader(absl::string_view file) {
  if (file.size() < 10 || file.substr(0, kNpyMagic.size()) != kNpyMagic)
    return absl::InvalidArgumentError(file.empty() ? "empty file, not a .npy file"
                                                   : "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(file[6]);
  const int minor = static_cast<unsigned char>(file[7]);
  int64_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(file[8]) | (static_cast<unsigned char>(file[9]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return corruptHeader("cut off inside its length");
    header_len = 0;
    for (int i = 3; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>(file[8 + i]);
    prefix = 12;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported .npy format version ", major, ".", minor, " (1, 2, 3 are read)"));
  }
  if (prefix + header_len > static_cast<int64_t>(file.size()))
    return corruptHeader(absl::StrCat("its length ", header_len, " runs past the end of the file"));
  HeaderParser p(file.substr(prefix, header_len));
  if (!p.take('{')) return corruptHeader("not a dict literal");
  std::string descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  while (!p.take('}')) {
    absl::StatusOr<std::string> key = p.string();
    if (!key.ok()) return key.status();
    if (!p.take(':')) return corruptHeader("expected ':' after a key");
    if (*key == "descr") {
      if (p.peek() == '[')
        return absl::InvalidArgumentError(
            "structured array (a record dtype): only arrays of numbers are read");
      absl::StatusOr<std::string> d = p.string();
      if (!d.ok()) return d.status();
      descr = *d;
    } else if (*key == "fortran_order") {
      absl::StatusOr<bool> b = p.boolean();
      if (!b.ok()) return b.status();
      fortran = *b;
    } else if (*key == "shape") {
      absl::StatusOr<std::vector<int64_t>> s = p.tuple();
      if (!s.ok()) return s.status();
      shape = *s;
    } else {
      return corruptHeader(absl::StrCat("unknown key '", *key, "'"));
    }
    if (!p.take(',') && p.peek() != '}') return corruptHeader("expected ',' or '}'");
  }
  if (descr.empty() || !fortran.has_value() || !shape.has_value())
    return corruptHeader("it lacks one of 'descr', 'fortran_order', 'shape'");
  absl::StatusOr<NpyDType> dtype = parseDescr(descr);
  if (!dtype.ok()) return dtype.status();
  int64_t non_unit = 0;
  for (int64_t d : *shape) non_unit += d != 1;
  // With at most one extent above 1, Fortran and C order lay the bytes out alike.
  if (*fortran && non_unit > 1)
    return absl::InvalidArgumentError(
        "Fortran-order array: only C order is read (numpy.ascontiguousarray makes one)");
  NpyHeader header{*dtype, *shape, prefix + header_len};
  // The bytes the shape needs, without overflow: at most the file's.
  const int64_t have = static_cast<int64_t>(file.size()) - header.data_offset;
  int64_t need = dtype->bytes;
  bool beyond = false;
  for (int64_t d : *shape) {
    if (d != 0 && need > std::numeric_limits<int64_t>::max() / d) beyond = true;
    if (!beyond) need *= d;
  }
  if (beyond || need > have)
    return absl::InvalidArgumentError(
        absl::StrCat("truncated array data: the file holds ", have, " bytes of it, shape (",
                     absl::StrJoin(*shape, ", "), ") of ", descr, " needs ",
                     beyond ? std::string("more than 2^63") : absl::StrCat(need)));
  return header;
}

NpyRangeError convertNpyElements(const NpyDType& from, const char* src, int64_t count, void* dst) {
  if (from.kind == 'f') {
    auto* out = static_cast<float*>(dst);
    if (from.bytes == 4) {
      std::memcpy(out, src, static_cast<size_t>(count) * 4);
      return {};
    }
    for (int64_t i = 0; i < count; ++i) {
      if (from.bytes == 2) {
        out[i] = halfToFloat(npyLoad<uint16_t>(src + 2 * i));
        continue;
      }
      const double v = npyLoad<double>(src + 8 * i);
      if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max())
        return {i, absl::StrCat(v)};
      out[i] = static_cast<float>(v);
    }
    return {};
  }
  auto* out = static_cast<int32_t*>(dst);
  if (from.kind == 'i' && from.bytes == 4) {
    std::memcpy(out, src, static_cast<size_t>(count) * 4);
    return {};
  }
  for (int64_t i = 0; i < count; ++i) {
    const char* p = src + i * from.bytes;
    if (from.kind == 'u' && from.bytes == 8) {
      const uint64_t v = npyLoad<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        return {i, absl::StrCat(v)};
      out[i] = static_cast<int32_t>(v);
      continue;
    }
    const int64_t v = npyElementAsInt64(from, p);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      return {i, absl::StrCat(v)};
    out[i] = static_cast<int32_t>(v);
  }
  return {};
}

int64_t npyElementAsInt64(const NpyDType& from, const char* p) {
  if (from.kind == 'b') return npyLoad<uint8_t>(p) != 0;
  if (from.kind == 'u') {
    switch (from.bytes) {
      case 1:
        return npyLoad<uint8_t>(p);
      case 2:
        return npyLoad<uint16_t>(p);
      case 4:
        return npyLoad<uint32_t>(p);
      default: {
        const uint64_t v = npyLoad<uint64_t>(p);
        return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                   ? std::numeric_limits<int64_t>::max()
                   : static_cast<int64_t>(v);
      }
    }
  }
  switch (from.bytes) {
    case 1:
      return npyLoad<int8_t>(p);
    case 2:
      return npyLoad<int16_t>(p);
    case 4:
      return npyLoad<int32_t>(p);
    default:
      return npyLoad<int64_t>(p);
  }
}

absl::StatusOr<std::string> npyFileHeader(ir::DType dtype, const std::vector<int64_t>& shape) {
  const char* descr = dtype == ir::DType::kF32   ? "<f4"
                      : dtype == ir::DType::kI32 ? "<i4"
                      : dtype == ir::DType::kF64 ? "<f8"
                                                 : nullptr;
  if (descr == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("numpy has no type for ", ir::dtypeName(dtype), " elements"));
  // Python's tuple literal: (3,) for one axis, (3, 10) for more, () for none.
  std::string tuple = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    absl::StrAppend(&tuple, i == 0 ? "" : ", ", shape[i], shape.size() == 1 ? "," : "");
  tuple += ")";
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", tuple, ", }");
  // Magic (6), version (2), header length (2), then the dict padded with spaces and ended
  // by a newline to a multiple of 64 bytes.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out(kNpyMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  return out + dict;
}

}  // namespace tandem::runtime::data
