#include "runtime/data/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {
namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
// Deflate cannot shrink data by more than about 1032:1; a larger claimed size is a lie
// that would otherwise allocate without bound.
constexpr int64_t kMaxDeflateRatio = 1032;

uint64_t zipLittleEndian(absl::string_view s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

absl::Status zipCorrupt(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("zipCorrupt zip archive: ", why));
}

}  // namespace

absl::StatusOr<std::vector<ZipEntry>> readZipEntries(absl::string_view zip) {
  if (zip.empty())
    return absl::InvalidArgumentError("empty file, not a zip archive (an .npz is one)");
  // The end record is the last 22 bytes, unless a comment (at most 65535 bytes) follows it.
  int64_t end = -1;
  const int64_t lowest = std::max<int64_t>(0, static_cast<int64_t>(zip.size()) - 22 - 65535);
  for (int64_t at = static_cast<int64_t>(zip.size()) - 22; at >= lowest; --at)
    if (zipLittleEndian(zip, at, 4) == kEndOfCentralDirectory) {
      end = at;
      break;
    }
  if (end < 0) return absl::InvalidArgumentError("not a zip archive (an .npz is one)");
  uint64_t entries = zipLittleEndian(zip, end + 10, 2);
  uint64_t directory_size = zipLittleEndian(zip, end + 12, 4);
  uint64_t directory_offset = zipLittleEndian(zip, end + 16, 4);
  if (end >= 20 && zipLittleEndian(zip, end - 20, 4) == kZip64EndLocator) {
    const uint64_t at = zipLittleEndian(zip, end - 20 + 8, 8);
    if (zip.size() < 56 || at > zip.size() - 56 || zipLittleEndian(zip, at, 4) != kZip64End)
      return zipCorrupt("its zip64 end record is missing");
    entries = zipLittleEndian(zip, at + 32, 8);
    directory_size = zipLittleEndian(zip, at + 40, 8);
    directory_offset = zipLittleEndian(zip, at + 48, 8);
  }
  if (directory_offset > zip.size() || directory_size > zip.size() - directory_offset)
    return zipCorrupt("its central directory lies beyond the end of the file (truncated?)");
  std::vector<ZipEntry> out;
  uint64_t at = directory_offset;
  const uint64_t directory_end = directory_offset + directory_size;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at + 46 > directory_end || zipLittleEndian(zip, at, 4) != kCentralHeader)
      return zipCorrupt("a bad central directory entry");
    ZipEntry e;
    const int flags = static_cast<int>(zipLittleEndian(zip, at + 8, 2));
    e.method = static_cast<int>(zipLittleEndian(zip, at + 10, 2));
    e.crc32 = static_cast<uint32_t>(zipLittleEndian(zip, at + 16, 4));
    e.compressed_size = static_cast<int64_t>(zipLittleEndian(zip, at + 20, 4));
    e.size = static_cast<int64_t>(zipLittleEndian(zip, at + 24, 4));
    const uint64_t name_len = zipLittleEndian(zip, at + 28, 2),
                   extra_len = zipLittleEndian(zip, at + 30, 2),
                   comment_len = zipLittleEndian(zip, at + 32, 2);
    uint64_t local = zipLittleEndian(zip, at + 42, 4);
    if (at + 46 + name_len + extra_len + comment_len > directory_end)
      return zipCorrupt("a bad central directory entry");
    e.name = std::string(zip.substr(at + 46, name_len));
    // Zip64's extra field holds, in this order, those of the sizes and offset whose 32-bit
    // fields are all ones.
    const uint64_t extra_end = at + 46 + name_len + extra_len;
    for (uint64_t x = at + 46 + name_len; x + 4 <= extra_end;) {
      const uint64_t id = zipLittleEndian(zip, x, 2), len = zipLittleEndian(zip, x + 2, 2);
      if (id == 0x0001) {
        uint64_t p = x + 4;
        const uint64_t field_end = std::min(x + 4 + len, extra_end);
        auto next = [&](int64_t& field) {
          if (field == 0xffffffff && p + 8 <= field_end) {
            field = static_cast<int64_t>(zipLittleEndian(zip, p, 8));
            p += 8;
          }
        };
        next(e.size);
        next(e.compressed_size);
        int64_t local64 = static_cast<int64_t>(local);
        next(local64);
        local = static_cast<uint64_t>(local64);
      }
      x += 4 + len;
    }
    if (flags & 1)
      return absl::InvalidArgumentError(absl::StrCat("entry '", e.name, "' is encrypted"));
    if (e.method != 0 && e.method != 8)
      return absl::InvalidArgumentError(absl::StrCat(
          "entry '", e.name, "' is compressed with method ", e.method,
          " (stored and deflated entries are read, as numpy.savez and savez_compressed write)"));
    if (local > zip.size() || zip.size() - local < 30 ||
        zipLittleEndian(zip, local, 4) != kLocalHeader)
      return zipCorrupt(absl::StrCat("entry '", e.name, "' has no local header"));
    e.data_offset = static_cast<int64_t>(local + 30 + zipLittleEndian(zip, local + 26, 2) +
                                         zipLittleEndian(zip, local + 28, 2));
    if (e.compressed_size < 0 || e.data_offset > static_cast<int64_t>(zip.size()) ||
        e.compressed_size > static_cast<int64_t>(zip.size()) - e.data_offset)
      return absl::InvalidArgumentError(absl::StrCat("truncated zip archive: entry '", e.name,
                                                     "' runs past the end of the file"));
    if (e.method == 0 && e.size != e.compressed_size)
      return zipCorrupt(absl::StrCat("stored entry '", e.name, "' has two sizes"));
    out.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

absl::StatusOr<std::string> inflateZipEntry(absl::string_view zip, const ZipEntry& e) {
  if (e.size < 0 || e.size > e.compressed_size * kMaxDeflateRatio + 1024)
    return zipCorrupt(absl::StrCat("entry '", e.name, "' claims ", e.size, " bytes from ",
                                   e.compressed_size, " deflated"));
  std::string out(static_cast<size_t>(e.size), '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return absl::InternalError("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zip.data() + e.data_offset));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  // zlib counts in uInt: feed and drain in pieces below 4 GiB.
  int64_t in_left = e.compressed_size, out_left = e.size;
  int rc = Z_OK;
  while (rc == Z_OK) {
    const uInt in_piece = static_cast<uInt>(std::min<int64_t>(in_left, 1 << 30));
    const uInt out_piece = static_cast<uInt>(std::min<int64_t>(out_left, 1 << 30));
    z.avail_in = in_piece;
    z.avail_out = out_piece;
    rc = inflate(&z, Z_NO_FLUSH);
    in_left -= in_piece - z.avail_in;
    out_left -= out_piece - z.avail_out;
    if (rc == Z_OK && z.avail_in == in_piece && z.avail_out == out_piece) rc = Z_BUF_ERROR;
  }
  const std::string zlib_message = z.msg != nullptr ? z.msg : "";
  inflateEnd(&z);
  if (rc != Z_STREAM_END || out_left != 0)
    return zipCorrupt(absl::StrCat("entry '", e.name, "' does not inflate to its ", e.size,
                                   " bytes", zlib_message.empty() ? "" : ": " + zlib_message));
  if (crc32_z(0, reinterpret_cast<const Bytef*>(out.data()), out.size()) != e.crc32)
    return zipCorrupt(absl::StrCat("entry '", e.name, "' fails its CRC-32 check"));
  return out;
}

}  // namespace tandem::runtime::data
