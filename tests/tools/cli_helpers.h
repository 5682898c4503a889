#pragma once

// Helpers for the tandem CLI tests: a scratch directory, and the check that a run failed
// the way every user error must fail (exit 2, no output, one line naming the culprit).

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace tandem::testing {

/// A fresh directory under /tmp, removed with everything in it when destroyed.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/tandem_cli_testXXXXXX";
    if (mkdtemp(name) != nullptr) path_ = name;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// Path of a file inside the directory.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  /// Writes `text` to a file inside the directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    writeFile(file(name), text);
    return file(name);
  }

 private:
  std::string path_;
};

// The epoch rows of a run's table without the timing columns: epoch, train loss, train
// accuracy, test accuracy.
inline std::vector<std::string> epochFigures(const std::string& out) {
  std::vector<std::string> rows;
  bool table = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, "train_loss")) {
      table = true;
      continue;
    }
    if (!table || line.empty()) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() < 4) continue;
    rows.push_back(absl::StrCat(cells[0], " ", cells[1], " ", cells[2], " ", cells[3]));
  }
  return rows;
}

// The CSV's columns that do not measure time: epoch, train and test loss and accuracy.
inline std::vector<std::string> csvFigures(const std::string& text) {
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (cells.size() < 5) continue;
    cells.resize(5);
    rows.push_back(absl::StrJoin(cells, ","));
  }
  return rows;
}

/// Success when the run is a usage error: exit code 2, nothing on standard output, and
/// exactly one line "tandem: ..." on standard error that contains every one of `parts`.
inline ::testing::AssertionResult isUsageError(const CommandResult& r,
                                               const std::vector<std::string>& parts) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure()
           << why << "\n  exit code: " << r.exit_code << "\n  stderr: " << r.err << "\n  stdout ("
           << r.out.size() << " bytes): " << r.out.substr(0, 200);
  };
  if (r.exit_code != 2) return fail("exit code is not 2");
  if (!r.out.empty()) return fail("standard output is not empty");
  if (r.err.rfind("tandem: ", 0) != 0) return fail("standard error does not start with 'tandem: '");
  if (r.err.empty() || r.err.back() != '\n' || r.err.find('\n') != r.err.size() - 1)
    return fail("standard error is not exactly one line");
  for (const std::string& part : parts)
    if (r.err.find(part) == std::string::npos) return fail("standard error lacks '" + part + "'");
  return ::testing::AssertionSuccess();
}

/// Writes a plain (uncompressed) IDX pair of `count` 28x28 images (or rows x cols) with
/// labels 0..9 in turn into `dir` as PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte:
/// a small Fashion-MNIST-shaped data set for CLI tests.
inline void writeIdxSplit(const TempDir& dir, const std::string& prefix, uint32_t count,
                          uint32_t rows = 28, uint32_t cols = 28) {
  auto putBigEndian = [](std::string& out, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  std::string images, labels;
  for (uint32_t v : {0x803u, count, rows, cols}) putBigEndian(images, v);
  for (uint32_t i = 0; i < count * rows * cols; ++i)
    images.push_back(static_cast<char>(i * 7 % 256));
  for (uint32_t v : {0x801u, count}) putBigEndian(labels, v);
  for (uint32_t i = 0; i < count; ++i) labels.push_back(static_cast<char>(i % 10));
  dir.write(prefix + "-images-idx3-ubyte", images);
  dir.write(prefix + "-labels-idx1-ubyte", labels);
}

// Rows of a metrics CSV as column name -> value.
inline std::vector<std::map<std::string, std::string>> readCsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string cell;
    while (std::getline(ss, cell, ',')) out.push_back(cell);
    return out;
  };
  if (std::getline(in, line)) header = split(line);
  while (std::getline(in, line)) {
    auto cells = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < cells.size() && i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

}  // namespace tandem::testing
