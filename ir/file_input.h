#pragma once

// Reading the files a user names (IR text, data, checkpoints, metrics), bounded: only a
// regular file is read (a FIFO would block at open or never end, /dev/zero never ends, a
// directory is not a file), and never more than a limit, so that no input makes a run
// wait forever or allocate without bound. Standard input ("-") may be a pipe, and is
// bounded the same way.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::ir {

/// How an input is named in errors: `what` ("IR file 'x.tir'") and what it should be
/// (`kind`: "an IR file"), as in "IR file 'x' is a FIFO (named pipe), not an IR file".
struct InputName {
  std::string what;
  std::string kind;
};

/// "a directory", "a FIFO (named pipe)", "a character device (such as /dev/zero)", ...:
/// what a file of st_mode `mode` is, for messages.
std::string describeFileType(uint32_t mode);

/// Opens `path` for reading if it is a regular file (without blocking on a FIFO) and
/// returns its descriptor (close-on-exec, blocking reads); else an error:
/// "cannot read WHAT: <strerror>" or "WHAT is <type>, not KIND".
absl::StatusOr<int> openRegularFile(const std::string& path, const InputName& name);

/// The whole of `path` (a regular file of at most `max_bytes`), or of standard input when
/// `path` is "-" (a pipe too, cut off with an error after `max_bytes`).
absl::StatusOr<std::string> readInputFile(const std::string& path, const InputName& name,
                                          int64_t max_bytes);

/// The whole of an open descriptor, at most `max_bytes` (an error beyond).
absl::StatusOr<std::string> readAllBounded(int fd, const InputName& name, int64_t max_bytes);

}  // namespace tandem::ir
