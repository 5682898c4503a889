#include "train/training_data.h"

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"
#include "runtime/data/fashion_mnist.h"

namespace tandem::training {
namespace {

absl::Status checkLimit(const std::string& setting, const std::optional<int64_t>& limit,
                        const runtime::data::Dataset& data, const char* what,
                        const std::string& where) {
  if (data.available == 0)  // the figures of no images would read as accuracy 0
    return absl::InvalidArgumentError(
        absl::StrCat(data.source, " holds no images: nothing to ",
                     std::string(what) == "test" ? "evaluate" : "train on"));
  if (limit && *limit > data.available)
    return absl::InvalidArgumentError(absl::StrCat(setting, ": ", *limit, " is more than the ",
                                                   data.available, " ", what, " images in ",
                                                   where));
  return absl::OkStatus();
}

}  // namespace

absl::Status checkTrainingData(const TrainingData& data, const std::string& where,
                               std::optional<int64_t> limit_train,
                               std::optional<int64_t> limit_test, int64_t batch,
                               const SettingNames& names) {
  RETURN_IF_ERROR(
      checkLimit(names(Setting::kLimitTrain), limit_train, data.train, "training", where));
  RETURN_IF_ERROR(checkLimit(names(Setting::kLimitTest), limit_test, data.test, "test", where));
  if (data.train.count < batch)
    return settingError(
        names, Setting::kBatch,
        absl::StrCat(batch, " is more than the ", data.train.count, " training images",
                     limit_train ? absl::StrCat(" left by ", names(Setting::kLimitTrain)) : "",
                     " (lower ", names(Setting::kBatch), ")"));
  return absl::OkStatus();
}

absl::StatusOr<TrainingData> loadFashionMnist(const std::string& dir,
                                              std::optional<int64_t> limit_train,
                                              std::optional<int64_t> limit_test, int64_t batch,
                                              const SettingNames& names) {
  using runtime::data::Split;
  TrainingData data;
  const std::string dir_setting = names(Setting::kData);
  ASSIGN_OR_RETURN(data.train, runtime::data::loadFashionMnist(
                                   dir, Split::kTrain, limit_train.value_or(0), dir_setting));
  RETURN_IF_ERROR(
      checkLimit(names(Setting::kLimitTrain), limit_train, data.train, "training", dir));
  ASSIGN_OR_RETURN(data.test, runtime::data::loadFashionMnist(dir, Split::kTest,
                                                              limit_test.value_or(0), dir_setting));
  RETURN_IF_ERROR(checkTrainingData(data, dir, limit_train, limit_test, batch, names));
  return data;
}

}  // namespace tandem::training
