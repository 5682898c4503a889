#pragma once

// The examples a run trains and evaluates on, opened and checked as `tandem train` and the
// public API both do: sources named by spec (runtime/data/open_source.h: Fashion-MNIST's
// files, NumPy arrays, image folders, token and text files), or examples a program holds;
// a validation part split off the training data, augmentation of the training images,
// the limits, and the checks that each part holds examples and the training part a batch.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/data/example_source.h"
#include "train/setting.h"

namespace tandem::training {

struct TrainingData {
  std::shared_ptr<const runtime::data::ExampleSource> train, test;
};

/// A data spec as runtime/data/open_source.h reads it: a directory (what `--data DIR` gave
/// before data had specs) is Fashion-MNIST's.
std::string dataSpecOf(const std::string& given);

/// Where the examples come from, as a front end gives them.
struct DataSource {
  /// The training data's spec (open_source.h); a directory is Fashion-MNIST's files in it.
  std::string spec = "fashion-mnist";
  /// The test data's spec. Unset: Fashion-MNIST's test half for a fashion-mnist spec,
  /// else the part `val_fraction` splits off the training data (one of them is needed).
  std::optional<std::string> test_spec;
  std::optional<double> val_fraction;
  /// An --augment list (runtime/data/transforms.h) for the image field `x`: its random
  /// transforms (crop, flip) apply to the training examples, the others (normalize,
  /// resize) to both parts.
  std::string augment;
  /// > 0: images of a folder are resized to this (--image-size).
  int64_t image_height = 0, image_width = 0;
  /// > 0: tokens and text are read in windows of this length when their spec gives none
  /// (a language model's context).
  int64_t window_length = 0;
  /// Examples already opened (a program's own, or the front end's: `tandem train` opens
  /// the data before it makes the model for it); then nothing above is opened again, though
  /// augment and val_fraction still are settings a resumed run and every rank must share.
  std::shared_ptr<const TrainingData> examples;
};

/// Opens the training and test sources `source` names, the validation part split off
/// with `seed`, each part cut to its limit and augmented as asked. Errors name the setting
/// (`--limit-train: 70000 is more than the 60000 training examples in fashion-mnist:DIR`)
/// or the file.
absl::StatusOr<std::shared_ptr<const TrainingData>> openTrainingData(
    const DataSource& source, std::optional<int64_t> limit_train, std::optional<int64_t> limit_test,
    uint64_t seed, const SettingNames& names);

/// OK when each part holds examples and the training examples fill a batch.
absl::Status checkTrainingData(const TrainingData& data, std::optional<int64_t> limit_train,
                               int64_t batch, const SettingNames& names);

/// A digest of a source's fields and contents (a sample of its examples, evenly spaced,
/// when they are large), which the processes of a run compare: cheap for a 2 GB array.
std::string sourceDigest(const runtime::data::ExampleSource& source);

}  // namespace tandem::training
