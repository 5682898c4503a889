#include "runtime/data/mapped_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path,
                                                             const ir::InputName& name,
                                                             int64_t release_every) {
  absl::StatusOr<int> fd = ir::openRegularFile(path, name);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int err = errno;
    ::close(*fd);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", name.what, ": ", std::strerror(err)));
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = st.st_size;
  file->release_every_ = release_every;
  if (st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, *fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(*fd);
      return absl::InvalidArgumentError(
          absl::StrCat("cannot map ", name.what, ": ", std::strerror(err)));
    }
    file->data_ = static_cast<const char*>(p);
  }
  ::close(*fd);  // the mapping keeps the file
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), static_cast<size_t>(size_));
}

void MappedFile::noteRead(int64_t bytes) const {
  if (release_every_ <= 0) return;
  const int64_t charge = bytes + kFaultAroundBytes;
  const int64_t total = since_release_.fetch_add(charge, std::memory_order_relaxed) + charge;
  if (total < release_every_) return;
  // One thread releases: the one that brings the count back to zero.
  int64_t expected = total;
  if (since_release_.compare_exchange_strong(expected, 0, std::memory_order_relaxed)) release();
}

void MappedFile::release() const {
  // A read-only shared file mapping: DONTNEED only unmaps the pages from this process; the
  // next access faults them in again from the page cache, with the same bytes.
  if (data_ != nullptr)
    ::madvise(const_cast<char*>(data_), static_cast<size_t>(size_), MADV_DONTNEED);
}

}  // namespace tandem::runtime::data
