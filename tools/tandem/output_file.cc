#include "tools/tandem/output_file.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::tools {

absl::StatusOr<OutputFile> OutputFile::open(const std::string& path, const std::string& flag) {
  if (path.empty())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": the file name is empty"));
  if (path == "-") return standardOutput();
  OutputFile out(nullptr, absl::StrCat(flag, ": cannot write '", path, "'"), true);
  out.file_ = std::fopen(path.c_str(), "w");
  if (out.file_ == nullptr) return out.failure(errno);
  return out;
}

OutputFile OutputFile::standardOutput() {
  return OutputFile(stdout, "cannot write to standard output", false);
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      what_(std::move(other.what_)),
      owned_(other.owned_) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    (void)close();
    file_ = std::exchange(other.file_, nullptr);
    what_ = std::move(other.what_);
    owned_ = other.owned_;
  }
  return *this;
}

OutputFile::~OutputFile() { (void)close(); }

absl::Status OutputFile::failure(int err) const {
  // ENOSPC and EIO are the disk's fault, EACCES and ENOENT the path's: all a user can fix.
  return absl::InvalidArgumentError(
      absl::StrCat(what_, ": ", err != 0 ? std::strerror(err) : "write failed"));
}

absl::Status OutputFile::write(absl::string_view text) {
  if (file_ == nullptr) return failure(EBADF);
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    return failure(errno);
  return absl::OkStatus();
}

absl::Status OutputFile::close() {
  if (file_ == nullptr) return absl::OkStatus();
  std::FILE* f = std::exchange(file_, nullptr);
  errno = 0;
  bool ok = std::fflush(f) == 0 && !std::ferror(f);
  int err = errno;
  if (owned_ && std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  return ok ? absl::OkStatus() : failure(err);
}

}  // namespace tandem::tools
