#include "tools/tandem/path_claims.h"

#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;

// The path as the file system resolves it; a path that cannot be resolved (a parent that
// is not a directory) stays as given, made absolute: the open that follows says why.
std::string canonicalOf(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  return p.string();
}

std::optional<std::pair<uint64_t, uint64_t>> inodeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

}  // namespace

absl::Status PathClaims::claim(const std::string& flag, const std::string& path, Use use) {
  if (path.empty() || path == "-") return absl::OkStatus();
  return add({.flag = flag,
              .shown = path,
              .canonical = canonicalOf(path),
              .inode = inodeOf(path),
              .use = use});
}

absl::Status PathClaims::claimPrefix(const std::string& flag, const std::string& dir,
                                     const std::string& prefix) {
  return add({.flag = flag,
              .shown = (fs::path(dir) / (prefix + "*")).string(),
              .canonical = canonicalOf(dir),
              .use = Use::kWrites,
              .prefix = prefix});
}

absl::Status PathClaims::add(Claim c) {
  auto overlaps = [](const Claim& a, const Claim& b) {
    if (a.prefix.empty() && b.prefix.empty())
      return a.canonical == b.canonical || (a.inode && b.inode && *a.inode == *b.inode);
    if (!a.prefix.empty() && !b.prefix.empty())
      return a.canonical == b.canonical &&
             (absl::StartsWith(a.prefix, b.prefix) || absl::StartsWith(b.prefix, a.prefix));
    const Claim& pattern = a.prefix.empty() ? b : a;
    const Claim& file = a.prefix.empty() ? a : b;
    const fs::path p(file.canonical);
    return p.parent_path().string() == pattern.canonical &&
           absl::StartsWith(p.filename().string(), pattern.prefix);
  };
  for (const Claim& old : claims_) {
    if ((old.use == Use::kReads && c.use == Use::kReads) || !overlaps(old, c)) continue;
    const Claim& writer = c.use == Use::kWrites ? c : old;
    const Claim& other = c.use == Use::kWrites ? old : c;
    if (other.use == Use::kWrites)
      return absl::InvalidArgumentError(absl::StrCat(writer.flag, ": '", writer.shown,
                                                     "' is a file ", other.flag,
                                                     " writes too; give each output its own "
                                                     "file"));
    return absl::InvalidArgumentError(absl::StrCat(writer.flag, ": '", writer.shown, "' is a file ",
                                                   other.flag,
                                                   " reads; writing it would destroy that input"));
  }
  claims_.push_back(std::move(c));
  return absl::OkStatus();
}

}  // namespace tandem::tools
