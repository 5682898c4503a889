#include "runtime/data/mapped_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path,
                                                             const ir::InputName& name) {
  absl::StatusOr<int> fd = ir::openRegularFile(path, name);
  if (!fd.ok()) return fd.status();
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->fd_ = *fd;  // closed by the destructor from here on
  file->path_ = path;
  struct stat st {};
  if (::fstat(*fd, &st) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", name.what, ": ", std::strerror(errno)));
  file->size_ = st.st_size;
  if (st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, *fd, 0);
    if (p == MAP_FAILED)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot map ", name.what, ": ", std::strerror(errno)));
    file->data_ = static_cast<const char*>(p);
  }
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), static_cast<size_t>(size_));
  if (fd_ >= 0) ::close(fd_);
}

absl::Status MappedFile::readAt(int64_t offset, int64_t bytes, void* dst) const {
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, out, static_cast<size_t>(bytes), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InvalidArgumentError(std::strerror(errno));
    if (n == 0) return absl::InvalidArgumentError("the file is shorter than when it was opened");
    out += n;
    offset += n;
    bytes -= n;
  }
  return absl::OkStatus();
}

void MappedFile::release() const {
  // A read-only shared file mapping: DONTNEED only unmaps the pages from this process; the
  // next access faults them in again from the page cache, with the same bytes.
  if (data_ != nullptr)
    ::madvise(const_cast<char*>(data_), static_cast<size_t>(size_), MADV_DONTNEED);
}

}  // namespace tandem::runtime::data
