#include "runtime/data/fashion_mnist.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {
namespace {

// How to get the data, naming the setting that gives its directory in the caller's words.
std::string howToGetIt(absl::string_view dir_setting) {
  return absl::StrCat("install the Debian package dataset-fashion-mnist or pass ", dir_setting,
                      " DIR");
}

// `dir/name.gz` if it exists, else `dir/name`; NotFound when neither does. Any other
// failure (a permission, say) is reported as itself, not as a missing file.
absl::StatusOr<std::string> findFile(const std::string& dir, const std::string& name,
                                     absl::string_view dir_setting) {
  const std::string plain = absl::StrCat(dir, "/", name);
  const std::string gz = absl::StrCat(plain, ".gz");
  for (const std::string& path : {gz, plain}) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) return path;
    if (errno != ENOENT)
      return absl::PermissionDeniedError(
          absl::StrCat("fashion-mnist: cannot read ", path, ": ", std::strerror(errno)));
  }
  return absl::NotFoundError(absl::StrCat("fashion-mnist: ", gz, " not found (nor ", name,
                                          " uncompressed) (", howToGetIt(dir_setting), ")"));
}

// A split's two files, less the ".gz" each may have.
std::pair<std::string, std::string> splitFiles(Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  return {prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte"};
}

}  // namespace

std::vector<std::string> fashionMnistFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (Split split : {Split::kTrain, Split::kTest}) {
    const auto [images, labels] = splitFiles(split);
    for (const std::string& name : {images, labels})
      for (const char* suffix : {".gz", ""}) files.push_back(absl::StrCat(dir, "/", name, suffix));
  }
  return files;
}

absl::StatusOr<Dataset> loadFashionMnist(const std::string& dir, Split split, int64_t limit,
                                         absl::string_view dir_setting) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("fashion-mnist: directory ", dir, " does not exist (",
                                              howToGetIt(dir_setting), ")"));
    return absl::PermissionDeniedError(
        absl::StrCat("fashion-mnist: cannot read directory ", dir, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("fashion-mnist: ", dir, " is not a directory (",
                                                   howToGetIt(dir_setting), ")"));
  }
  if (::access(dir.c_str(), R_OK | X_OK) != 0)
    return absl::PermissionDeniedError(
        absl::StrCat("fashion-mnist: cannot read directory ", dir, ": ", std::strerror(errno)));
  const auto [images_name, labels_name] = splitFiles(split);
  absl::StatusOr<std::string> images = findFile(dir, images_name, dir_setting);
  if (!images.ok()) return images.status();
  absl::StatusOr<std::string> labels = findFile(dir, labels_name, dir_setting);
  if (!labels.ok()) return labels.status();
  return readIdxPair(*images, *labels, limit, kFashionMnistClasses);
}

}  // namespace tandem::runtime::data
