#include "ir/file_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::ir {
namespace {

std::string sizeText(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%g GiB", bytes / double(1 << 30));
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%g MiB", bytes / double(1 << 20));
  return absl::StrCat(bytes, " bytes");
}

absl::Status readError(const InputName& name, int err) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot read ", name.what, ": ", std::strerror(err)));
}

absl::Status tooLarge(const InputName& name, int64_t max_bytes) {
  return absl::InvalidArgumentError(absl::StrCat(name.what, " is larger than ", sizeText(max_bytes),
                                                 ", more than ", name.kind, " can be"));
}

}  // namespace

std::string describeFileType(uint32_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device (such as /dev/zero)";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

absl::StatusOr<int> openRegularFile(const std::string& path, const InputName& name) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::Status(
        err == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInvalidArgument,
        absl::StrCat("cannot read ", name.what, ": ", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return readError(name, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(name.what, " is ", describeFileType(st.st_mode), ", not ", name.kind));
  }
  // Reads of a regular file block as usual.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

absl::StatusOr<std::string> readAllBounded(int fd, const InputName& name, int64_t max_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return readError(name, errno);
  if (S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(name.what, " is a directory, not ", name.kind));
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) return tooLarge(name, max_bytes);
  std::string text;
  if (S_ISREG(st.st_mode)) text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return text;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return readError(name, errno);
    if (static_cast<int64_t>(text.size()) + n > max_bytes) return tooLarge(name, max_bytes);
    text.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<std::string> readInputFile(const std::string& path, const InputName& name,
                                          int64_t max_bytes) {
  if (path == "-") return readAllBounded(STDIN_FILENO, name, max_bytes);
  absl::StatusOr<int> fd = openRegularFile(path, name);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::string> text = readAllBounded(*fd, name, max_bytes);
  ::close(*fd);
  return text;
}

}  // namespace tandem::ir
