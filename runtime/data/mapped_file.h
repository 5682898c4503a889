#pragma once

// A data file a user names, open for the run: memory-mapped read-only for what is read
// once when a source opens (an .npy header, an .npz's directory, the one pass over a
// classifier's labels), and read with pread for the examples themselves.
//
// Why examples are not read through the mapping: pages once touched stay in the process's
// resident set, so an epoch over a mapped 2 GiB file ends with 2 GiB resident unless the
// pages are dropped (madvise DONTNEED) as it goes, and then every read faults again, which
// on this project's (virtual) machines costs tens of microseconds. One shuffled epoch of a
// 2 GiB .npy of 3x32x32 f32 examples on 2 threads (bench/npy_source_rss): mapped, 45,000
// examples/s ending with 2 GiB resident, or 6,600 examples/s with the pages dropped every
// 64 MiB (69 MiB resident); with pread, 153,000 examples/s and 6 MiB resident (the page
// cache holds the file either way). And a file cut short while mapped kills the process
// (SIGBUS) where pread returns a short read: an error.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ir/file_input.h"

namespace tandem::runtime::data {

class MappedFile {
 public:
  /// Opens and maps `path` (a regular file, opened with ir::openRegularFile: errors as
  /// its). An empty file maps to no bytes.
  static absl::StatusOr<std::shared_ptr<MappedFile>> open(const std::string& path,
                                                          const ir::InputName& name);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// The mapping (for what a source reads once when it opens).
  const char* data() const { return data_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Copies `bytes` bytes at `offset` into `dst` with pread (any thread). An error says
  /// why in words without the file's name: "the file is shorter than when it was opened",
  /// or the system's reason.
  absl::Status readAt(int64_t offset, int64_t bytes, void* dst) const;
  /// Drops the mapping's pages from the resident set (after a pass over labels); the page
  /// cache keeps them.
  void release() const;

 private:
  MappedFile() = default;
  int fd_ = -1;
  const char* data_ = nullptr;
  int64_t size_ = 0;
  std::string path_;
};

}  // namespace tandem::runtime::data
