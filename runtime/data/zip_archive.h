#pragma once

// The entries of a zip archive (an .npz is one: numpy.savez stores its .npy files
// uncompressed, numpy.savez_compressed deflates them), read from its central directory,
// with zip64's extensions for archives and entries beyond 4 GiB.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::runtime::data {

struct ZipEntry {
  std::string name;
  int method = 0;  // 0 stored, 8 deflated
  uint32_t crc32 = 0;
  int64_t compressed_size = 0, size = 0;
  int64_t data_offset = 0;  // of the entry's (stored or compressed) bytes in the archive
};

/// The entries of the archive `zip` (the whole file). Errors (without the file's name):
/// "not a zip archive (an .npz is one)", "corrupt zip archive: ...", an entry that is
/// encrypted or compressed otherwise than deflate.
absl::StatusOr<std::vector<ZipEntry>> readZipEntries(absl::string_view zip);

/// The bytes of a deflated entry, inflated with zlib (into memory) and checked against its
/// size and CRC-32.
absl::StatusOr<std::string> inflateZipEntry(absl::string_view zip, const ZipEntry& entry);

}  // namespace tandem::runtime::data
