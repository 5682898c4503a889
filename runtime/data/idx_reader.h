#pragma once

// Reading IDX files (the format of MNIST and Fashion-MNIST), gzip-compressed or plain.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::runtime::data {

/// Number of classes in Fashion-MNIST (and MNIST); the default label bound.
inline constexpr int32_t kFashionMnistClasses = 10;

/// A labelled image set held in memory.
/// Images as f32 [count, channels, rows, cols] (IDX files: one channel, scaled to [0,1]);
/// labels i32 in [0, classes).
struct Dataset {
  int64_t count = 0;      // examples loaded (at most the limit asked for)
  int64_t available = 0;  // examples in the files
  int64_t channels = 1, rows = 0, cols = 0;
  std::vector<float> images;
  std::vector<int32_t> labels;
  /// Where the data came from (the images file, and the labels file), for messages.
  std::string source, labels_source;
  /// Labels are in [0, classes).
  int32_t classes = kFashionMnistClasses;

  /// Floats per example.
  int64_t exampleSize() const { return channels * rows * cols; }
  /// The shape of one example: [channels, rows, cols] (channels, height, width).
  std::vector<int64_t> exampleShape() const { return {channels, rows, cols}; }
};

/// Reads one IDX unsigned-byte images file (magic 0x00000803, [count, rows, cols]) and one
/// IDX unsigned-byte labels file (magic 0x00000801, [count]). Both may be gzip-compressed
/// or plain (zlib reads either). `limit` > 0 keeps the first `limit` examples and reads
/// no further into the files. Every label must be in [0, classes).
/// Errors name the file and what is wrong: missing or unreadable file, not gzip/IDX, wrong
/// magic number, truncated body, corrupt gzip data, count mismatch, label out of range.
absl::StatusOr<Dataset> readIdxPair(const std::string& images_path,
                                    const std::string& labels_path, int64_t limit = 0,
                                    int32_t classes = kFashionMnistClasses);

}  // namespace tandem::runtime::data
