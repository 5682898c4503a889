#pragma once

// The examples a run trains and evaluates on, read and checked as `tandem train` and the
// public API both do: Fashion-MNIST's files, or examples a program holds, each checked to
// hold images, to cover the limits asked for and at least one batch.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/data/idx_reader.h"
#include "train/setting.h"

namespace tandem::training {

struct TrainingData {
  runtime::data::Dataset train, test;
};

/// Fashion-MNIST's training and test halves from `dir` (runtime/data/fashion_mnist.h),
/// each cut to its limit, checked as checkTrainingData says. Errors name the file or the
/// setting (`--limit-train: 70000 is more than the 60000 training images in DIR`).
absl::StatusOr<TrainingData> loadFashionMnist(const std::string& dir,
                                              std::optional<int64_t> limit_train,
                                              std::optional<int64_t> limit_test, int64_t batch,
                                              const SettingNames& names);

/// OK when each half holds images, a limit asked for (limit_train, limit_test) is no more
/// than the images `where` holds, and the training images fill a batch.
absl::Status checkTrainingData(const TrainingData& data, const std::string& where,
                               std::optional<int64_t> limit_train,
                               std::optional<int64_t> limit_test, int64_t batch,
                               const SettingNames& names);

}  // namespace tandem::training
