#include "tools/tandem/output_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/file_input.h"
#include "ir/status_macros.h"

namespace tandem::tools {
namespace {

/// `path` beside itself, hidden, with mkstemp's template: ".NAME.XXXXXX" (+ `suffix`).
std::string besideTemplate(const std::string& path, const std::string& suffix = "") {
  const std::filesystem::path target(path);
  if (target.parent_path().empty()) return absl::StrCat(".", path, suffix, ".XXXXXX");
  return (target.parent_path() / absl::StrCat(".", target.filename().string(), suffix, ".XXXXXX"))
      .string();
}

// Opens `path` write-only with `more` flags (O_CREAT | O_TRUNC, O_CREAT | O_EXCL, ...).
// Never blocks: a FIFO that no process reads would wait for a reader forever at the open;
// it fails with ENXIO instead, and writes block as usual afterwards. -1 and errno on failure.
int openToWrite(const std::string& path, int more) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK | more, 0666);
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// The refusal of a FIFO that no process reads (openToWrite's ENXIO), as an input FIFO's
// is refused; OK for any other failure, which the caller reports.
absl::Status refuseUnreadFifo(int err, const std::string& path, const std::string& flag) {
  struct stat st {};
  if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", path, "' is ", ir::describeFileType(st.st_mode),
                     " that no process reads; start its reader first, or name a regular file"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OutputFile> OutputFile::open(const std::string& path, const std::string& flag) {
  if (path.empty())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": the file name is empty"));
  if (path == "-") return standardOutput();
  OutputFile out(nullptr, absl::StrCat(flag, ": cannot write '", path, "'"), true);
  const int fd = openToWrite(path, O_CREAT | O_TRUNC);
  if (fd < 0) {
    const int err = errno;
    RETURN_IF_ERROR(refuseUnreadFifo(err, path, flag));
    return out.failure(err);
  }
  out.file_ = ::fdopen(fd, "w");
  if (out.file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    return out.failure(err);
  }
  return out;
}

absl::StatusOr<OutputFile> OutputFile::openReplacing(const std::string& path,
                                                     const std::string& flag) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (path.empty() || path == "-" || (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)))
    return open(path, flag);
  OutputFile out(nullptr, absl::StrCat(flag, ": cannot write '", path, "'"), true);
  if (exists && S_ISDIR(st.st_mode)) return out.failure(EISDIR);
  std::string temporary = besideTemplate(path);
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return out.failure(errno);
  // The mode a plain open would give (0666 less the umask), not mkstemp's 0600.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  out.file_ = ::fdopen(fd, "w");
  if (out.file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    return out.failure(err);
  }
  out.temporary_ = std::move(temporary);
  out.final_path_ = path;
  return out;
}

absl::StatusOr<OutputFile> OutputFile::claim(const std::string& path, const std::string& flag) {
  if (path.empty())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": the file name is empty"));
  if (path == "-") return standardOutput();
  OutputFile out(nullptr, absl::StrCat(flag, ": cannot write '", path, "'"), true);
  // Made here (O_EXCL tells), or opened as it is: never truncated before start().
  bool made = true;
  int fd = openToWrite(path, O_CREAT | O_EXCL);
  if (fd < 0 && errno == EEXIST) {
    made = false;
    fd = openToWrite(path, 0);
  }
  if (fd < 0) {
    const int err = errno;
    RETURN_IF_ERROR(refuseUnreadFifo(err, path, flag));
    return out.failure(err);
  }
  struct stat st {};
  out.regular_ = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (out.regular_ && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (made) ::unlink(path.c_str());
    if (err == EWOULDBLOCK)
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", path,
                       "' is being written by another run; wait for it to end, or write to "
                       "another file"));
    return out.failure(err);
  }
  out.file_ = ::fdopen(fd, "w");  // fdopen truncates nothing
  if (out.file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    if (made) ::unlink(path.c_str());
    return out.failure(err);
  }
  if (made) out.made_ = path;
  return out;
}

absl::Status OutputFile::start() {
  if (file_ == nullptr || !owned_) return absl::OkStatus();
  made_.clear();  // from here on the file is the run's output, kept however the run ends
  if (regular_ && ::ftruncate(::fileno(file_), 0) != 0) return failure(errno);
  return absl::OkStatus();
}

OutputFile OutputFile::standardOutput() {
  return OutputFile(stdout, "cannot write to standard output", false);
}

absl::Status OutputFile::checkReplaceable(const std::string& path, const std::string& flag) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": '", path, "' is ", ir::describeFileType(st.st_mode),
                   ", not a regular file (the file is replaced whole; name a regular file)"));
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      what_(std::move(other.what_)),
      owned_(other.owned_),
      temporary_(std::exchange(other.temporary_, "")),
      final_path_(std::move(other.final_path_)),
      made_(std::exchange(other.made_, "")),
      regular_(other.regular_) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discardTemporary();
    (void)close();
    file_ = std::exchange(other.file_, nullptr);
    what_ = std::move(other.what_);
    owned_ = other.owned_;
    temporary_ = std::exchange(other.temporary_, "");
    final_path_ = std::move(other.final_path_);
    made_ = std::exchange(other.made_, "");
    regular_ = other.regular_;
  }
  return *this;
}

OutputFile::~OutputFile() {
  // Not closed: a replacing file was not finished, and its path keeps what it had.
  discardTemporary();
  (void)close();
}

void OutputFile::discardTemporary() {
  // A claimed file never started was made for a run that wrote nothing: it goes.
  if (!made_.empty()) {
    if (file_ != nullptr) std::fclose(std::exchange(file_, nullptr));
    ::unlink(made_.c_str());
    made_.clear();
  }
  if (temporary_.empty()) return;
  if (file_ != nullptr) std::fclose(std::exchange(file_, nullptr));
  ::unlink(temporary_.c_str());
  temporary_.clear();
}

absl::Status OutputFile::failure(int err) {
  discardTemporary();
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

absl::Status OutputFile::finish() {
  if (file_ == nullptr) return absl::OkStatus();
  std::FILE* f = std::exchange(file_, nullptr);
  errno = 0;
  bool ok = std::fflush(f) == 0 && !std::ferror(f);
  int err = errno;
  if (owned_ && std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) return failure(err);
  return absl::OkStatus();
}

absl::Status OutputFile::close() {
  if (absl::Status s = finish(); !s.ok()) return s;
  if (!temporary_.empty()) {
    if (::rename(temporary_.c_str(), final_path_.c_str()) != 0) return failure(errno);
    temporary_.clear();
  }
  return absl::OkStatus();
}

absl::Status OutputFile::closeAll(std::vector<OutputFile>& files) {
  // Every byte of every file first: a full disk or a write error changes no path.
  for (OutputFile& f : files)
    if (absl::Status s = f.finish(); !s.ok()) return s;  // the destructors drop the rest
  // Then the renames, each path's old file kept under a hard link until all are in place.
  struct Placed {
    OutputFile* file;
    bool existed;        // the path had a file before
    std::string backup;  // its hard link, empty when none could be made
  };
  std::vector<Placed> placed;
  auto undo = [&placed] {
    for (auto it = placed.rbegin(); it != placed.rend(); ++it) {
      if (!it->backup.empty()) {
        ::rename(it->backup.c_str(), it->file->final_path_.c_str());
      } else if (!it->existed) {
        ::unlink(it->file->final_path_.c_str());
      }
    }
  };
  for (OutputFile& f : files) {
    if (f.temporary_.empty()) continue;  // written in place (a FIFO, /dev/null)
    std::string backup;
    struct stat st {};
    const bool existed = ::stat(f.final_path_.c_str(), &st) == 0;
    if (existed) {
      // A free name from mkstemp, taken over by the link (mkstemp's file removed first).
      backup = besideTemplate(f.final_path_, ".old");
      const int fd = ::mkostemp(backup.data(), O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      if (fd < 0 || ::unlink(backup.c_str()) != 0 ||
          ::link(f.final_path_.c_str(), backup.c_str()) != 0)
        backup.clear();  // no way back for this one; the rename goes ahead
    }
    if (::rename(f.temporary_.c_str(), f.final_path_.c_str()) != 0) {
      const int err = errno;
      if (!backup.empty()) ::unlink(backup.c_str());
      undo();
      return f.failure(err);
    }
    f.temporary_.clear();
    placed.push_back({&f, existed, std::move(backup)});
  }
  for (const Placed& p : placed)
    if (!p.backup.empty()) ::unlink(p.backup.c_str());
  return absl::OkStatus();
}

}  // namespace tandem::tools
