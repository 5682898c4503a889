#pragma once

// A source from its --data text (the spec), as docs/DESIGN.md section 6 lists them:
//   fashion-mnist[:DIR]
//   npz:FILE[:FIELD=ARRAY,...]
//   npy:FILE | npy:FIELD=FILE,...
//   tokens:FILE[:u16|:u32][:length=N][:vocab=N]
//   text:FILE[:chars|:bytes][:length=N][:vocab=N]
//   images:DIR[:size=S|:size=HxW][:by-name]

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/data/example_source.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/text_source.h"

namespace tandem::runtime::data {

struct SourceOptions {
  /// The setting the spec came from, for messages ("--data", "--test-data").
  std::string setting = "--data";
  /// fashion-mnist: which half of the data set.
  Split split = Split::kTrain;
  /// > 0: only the first `limit` examples (Fashion-MNIST reads no further into its files).
  int64_t limit = 0;
  /// npz, npy: > 0, the class labels are checked to be below it (a test set's against its
  /// training set's classes). images: the number of class folders must be it.
  int64_t classes = 0;
  /// tokens, text: the window length and vocabulary when the spec gives none (the model's
  /// context length and vocabulary).
  int64_t length = 0;
  int64_t vocabulary = 0;
  /// images: > 0 (both), every image is resized to this when the spec gives no size=
  /// (--image-size).
  int64_t image_height = 0, image_width = 0;
};

/// Opens the source `spec` names. Errors are one line naming the spec word or the file at
/// fault: "--data 'npz:d.npz:x': 'x' is not FIELD=ARRAY", "npz file 'd.npz': ...".
absl::StatusOr<std::unique_ptr<ExampleSource>> openSource(absl::string_view spec,
                                                          const SourceOptions& options = {});

/// The files `spec` may read (Fashion-MNIST's IDX files, with and without .gz; npz, npy,
/// tokens and text files; none for an image folder, whose files are in its subfolders),
/// for a command to claim against the files it writes (an output over its own input). A
/// spec openSource would refuse gives none: opening it says why.
std::vector<std::string> filesOfSpec(absl::string_view spec);

/// The vocabulary of a text source (under any --limit view of it), for decoding what a
/// model writes; null for any other source.
std::shared_ptr<const TextVocabulary> textVocabularyOf(const ExampleSource& source);

}  // namespace tandem::runtime::data
