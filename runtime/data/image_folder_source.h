#pragma once

// A folder of images, one subfolder per class, as torchvision's ImageFolder reads it:
// DIR/CLASS/... holds PNG and JPEG files (known by their first bytes, not their names),
// grayscale or RGB. Opening the folder lists it and reads each file's header (size and
// channels, not the pixels), or each whole file when they are small in all; an example's
// pixels are decoded when it is read, on the loader's threads (image_codec.h).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/example_source.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/transforms.h"

namespace tandem::runtime::data {

struct ImageFolderOptions {
  /// > 0 (both): every image is resized to height x width (bilinear, as transforms.h's
  /// resize); else every image must have the first one's size.
  int64_t height = 0, width = 0;
  /// Examples ordered by file name over all classes (ties by class, then by path), not
  /// class by class: a folder written from an indexed data set (train/3/00017.png) reads
  /// in the data set's order, so that a shuffled epoch picks the same examples.
  bool by_name = false;
  /// > 0: the number of class folders the data must have (a test folder's against its
  /// training folder's: with a class missing, every later class's id would move).
  int64_t classes = 0;
  /// A folder whose files take at most this many bytes in all is read whole when opened,
  /// and its examples are decoded from memory (Fashion-MNIST's 60,000 PNG files are 21 MB):
  /// reading only a header costs the same system calls, which are most of an image's read
  /// on a VM (docs/PERF.md). Larger folders' files are read when an example is.
  int64_t file_cache_bytes = int64_t{128} << 20;
  /// A folder whose decoded pixels (8-bit, before any resize) take at most this many bytes
  /// keeps them in memory after each image's first read.
  int64_t decoded_cache_bytes = int64_t{512} << 20;
};

/// Classes: the names of DIR's subfolders, sorted (byte order, as Python sorts them),
/// ids 0, 1, ...; names starting with '.' are skipped (.ipynb_checkpoints), as are files
/// in DIR itself. A class's images are every file under its folder, subfolders included,
/// ordered as torchvision's ImageFolder orders them (folders by path, then file names);
/// hidden files (.DS_Store) are skipped, and any other file that is not a PNG or JPEG is an
/// error (skipping it would train on less data than the folder holds without a word).
///
/// Fields x: f32[C,H,W] with values v / 255 (torchvision's ToTensor) and y: i32[] (the
/// class id); class labels {"y", number of classes}. C is 1 when every image is grayscale
/// (a PNG of color type gray or gray+alpha, a one-component JPEG), else 3, a grayscale
/// image's value repeated in each channel (PIL's convert("RGB")). Alpha is dropped, a
/// palette expanded, 16-bit samples reduced to their high byte (image_codec.h).
class ImageFolderSource : public ExampleSource {
 public:
  static absl::StatusOr<std::unique_ptr<ImageFolderSource>> open(
      const std::string& dir, const ImageFolderOptions& options = {});

  std::string where() const override { return "images:" + dir_; }
  int64_t size() const override { return static_cast<int64_t>(images_.size()); }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;
  std::pair<std::string, int64_t> classLabels() const override {
    return {"y", static_cast<int64_t>(classes_.size())};
  }

  const std::vector<std::string>& classes() const { return classes_; }
  /// Example `index`'s file, relative to the folder ("cat/7.png"), and its class id.
  const std::string& file(int64_t index) const { return images_[static_cast<size_t>(index)].file; }
  int32_t classOf(int64_t index) const { return images_[static_cast<size_t>(index)].label; }

  struct Image {
    std::string file;
    int32_t label = 0;
    ImageHeader header;
    int64_t file_bytes = 0;  // its size when the folder was opened
    // The whole file as read when the folder was opened, when the folder's files fit in
    // file_cache_bytes (else empty: read when the example is). Kept after the pixels are
    // cached too: freeing them would race with a second reader of the same example, and
    // they are at most a quarter of the cache's size.
    std::vector<uint8_t> bytes;
  };

 private:
  ImageFolderSource() = default;

  std::string dir_;
  std::vector<std::string> classes_;
  std::vector<Image> images_;
  std::vector<Field> fields_;
  std::unique_ptr<ImageTransform> resize_;  // set when a size was given
  // Each image's decoded pixels once read, when all of them fit in decoded_cache_bytes:
  // later epochs read no file and decode nothing (tf.data's cache(), automatic for small
  // sets: Fashion-MNIST's 60,000 are 47 MB). cached_[i]: 0 not yet, 1 being stored by one
  // loader thread, 2 ready (written once, then only read, so readers need no lock).
  std::unique_ptr<std::atomic<uint8_t>[]> cached_;
  mutable std::vector<std::vector<uint8_t>> decoded_;
};

}  // namespace tandem::runtime::data
