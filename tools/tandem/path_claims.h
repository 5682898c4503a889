#pragma once

// The files one command writes and reads, each claimed by the flag that names it before
// anything is opened: two outputs on one path (--metrics m.json --trace m.json), or an
// output on an input (--metrics DATA/train-images-idx3-ubyte), would lose one of them,
// so the second claim is refused up front. Paths compare as the file system resolves
// them: relative or absolute, through symbolic links and "..", and an existing file by
// its device and inode (a hard link is the same file).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tandem::tools {

class PathClaims {
 public:
  enum class Use { kWrites, kReads };

  /// Claims `path` for `flag`: refused when another flag's output is that file, or when
  /// either of the two claims writes and they are one file. "-" (standard output or
  /// input) is not a path and is left to the flags' own checks.
  absl::Status claim(const std::string& flag, const std::string& path, Use use);
  /// Claims every file in `dir` whose name starts with `prefix` (the unique temporary
  /// files a checkpoint is written through) as an output of `flag`.
  absl::Status claimPrefix(const std::string& flag, const std::string& dir,
                           const std::string& prefix);

 private:
  struct Claim {
    std::string flag;
    std::string shown;      // the path as the flag gave it
    std::string canonical;  // resolved (or, for a prefix claim, the directory's)
    std::optional<std::pair<uint64_t, uint64_t>> inode;  // device and inode, when it exists
    Use use = Use::kWrites;
    std::string prefix;  // a claim of every name in `canonical` that starts with it
  };
  absl::Status add(Claim c);

  std::vector<Claim> claims_;
};

}  // namespace tandem::tools
