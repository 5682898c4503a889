#pragma once

// Fashion-MNIST as shipped by Debian's dataset-fashion-mnist package: four IDX files.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/data/idx_reader.h"

namespace tandem::runtime::data {

/// Which half of the data set: 60000 training or 10000 test examples.
enum class Split { kTrain, kTest };

/// Default directory /usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist).
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Reads train-images-idx3-ubyte.gz + train-labels-idx1-ubyte.gz (or t10k-*) from `dir`,
/// via zlib; the uncompressed file names are accepted when a .gz is absent. `limit` > 0
/// keeps the first `limit` examples. Errors name the directory or file and what is wrong,
/// and a missing directory or file says how to get the data (`dir_setting`: the caller's
/// name for the setting that gives `dir`).
absl::StatusOr<Dataset> loadFashionMnist(const std::string& dir, Split split, int64_t limit = 0,
                                         absl::string_view dir_setting = "data");

/// Every file loadFashionMnist may read in `dir` (both splits, each file with and without
/// ".gz"), for a command to claim against the files it writes.
std::vector<std::string> fashionMnistFiles(const std::string& dir);

}  // namespace tandem::runtime::data
