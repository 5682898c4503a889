#pragma once

// A file a user names, memory-mapped read-only. Reading a data set through a mapping keeps
// only the pages read resident; and since pages once touched stay in the process's
// resident set until the kernel needs them, the mapping drops them (madvise DONTNEED: the
// page cache keeps them, the process no longer counts them) after every `release_every`
// bytes made resident, so that an epoch over a file of any size stays within a bounded resident
// set.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ir/file_input.h"

namespace tandem::runtime::data {

/// Bytes made resident between two releases of a mapping's pages by default.
inline constexpr int64_t kDefaultReleaseEvery = int64_t{64} << 20;
/// What a page fault maps of a file already in the page cache: Linux's fault_around_bytes
/// (64 KiB since 3.15), the pages around the faulting one.
inline constexpr int64_t kFaultAroundBytes = int64_t{64} << 10;

class MappedFile {
 public:
  /// Maps `path` (a regular file, opened with ir::openRegularFile: errors as its). An empty
  /// file maps to no bytes.
  static absl::StatusOr<std::shared_ptr<MappedFile>> open(
      const std::string& path, const ir::InputName& name,
      int64_t release_every = kDefaultReleaseEvery);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Tells the mapping that one read of `bytes` bytes of it was made (any thread). Past
  /// `release_every` bytes made resident since the last release, its pages leave the
  /// resident set (a reader on another thread just faults its page in again). A read makes
  /// more resident than it reads: the kernel maps the cached pages around a faulting one
  /// too (fault-around, 64 KiB by default), so each read counts that much more.
  void noteRead(int64_t bytes) const;
  /// Drops every resident page of the mapping now.
  void release() const;

 private:
  MappedFile() = default;
  const char* data_ = nullptr;
  int64_t size_ = 0;
  int64_t release_every_ = kDefaultReleaseEvery;
  std::string path_;
  mutable std::atomic<int64_t> since_release_{0};
};

}  // namespace tandem::runtime::data
