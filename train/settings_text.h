#pragma once

// The settings front ends are given as text (`tandem train --devices cpu:0,cpu:1`, the public
// API's `TrainConfig::devices = "cpu:0,cpu:1"`), parsed into TrainConfig's types. Both front
// ends call these, so a word is read one way and a mistake is said one way, naming the
// setting in the front end's words (train/setting.h).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/optimizer_configs.h"
#include "ir/types.h"
#include "train/model_settings.h"
#include "train/setting.h"

namespace tandem::training {

/// A list such as "cpu:0,cpu:1", or a count N (cpu:0 to cpu:N-1): the devices of this process.
absl::StatusOr<std::vector<ir::Device>> parseDevicesSetting(absl::string_view text,
                                                            const SettingNames& names);

/// "even", positive weights such as "3,1" or "auto" (the weights' count, and auto outside
/// training, are checked when the settings are resolved); `for_training` says whether the
/// error for another word lists auto.
absl::StatusOr<Split> parseSplitSetting(absl::string_view text, bool for_training,
                                        const SettingNames& names);

/// "auto" (unset: on where a device is a CUDA one), "on" or "off".
absl::StatusOr<std::optional<bool>> parseGroupUpdatesSetting(absl::string_view text,
                                                             const SettingNames& names);

/// A dtype Tandem trains in (f32, bf16), for `setting` (precision, allreduce_dtype).
absl::StatusOr<ir::FloatType> parseFloatTypeSetting(Setting setting, absl::string_view text,
                                                    const SettingNames& names);

/// A number as it was written, for messages that quote it ("1e39", not "1e+39").
struct WrittenNumber {
  double value = 0;
  std::string text;
};

/// The optimizer a run trains with: the one `name` names (sgd, adamw: an optimizer update
/// op of ir/ops.td), unset the model's (ModelSpec::defaults), with `given` values set on it
/// by attribute (weight_decay). A named optimizer other than the model's starts from its
/// presets (PyTorch's defaults), the model's from the model's values. Each given value must
/// be a hyper-parameter of that optimizer, within the range ir/ops.td declares for it.
absl::StatusOr<ir::OptimizerConfig> chooseOptimizer(
    const ir::OptimizerConfig& model_default, const std::optional<std::string>& name,
    const std::map<std::string, WrittenNumber>& given, const SettingNames& names);

/// The settings a front end gets as text, as written; each default is the setting's own.
struct WrittenSettings {
  std::string devices = "cpu:0";
  std::optional<std::string> optimizer;
  /// The optimizer's values given (--lr, TrainConfig::lr), by attribute (weight_decay).
  std::map<std::string, WrittenNumber> hyper;
  std::string split = "even";
  std::string group_updates = "auto";
  std::string precision = "f32";
  std::string allreduce_dtype = "f32";
};

/// `written` parsed into `settings`' typed fields (the optimizer only when one is named or
/// a value given: else the model's stays); `spec` is the model's, whose optimizer an unnamed
/// one is. What both front ends call, so that they read each word alike.
absl::Status parseWrittenSettings(const WrittenSettings& written, const ModelSpec& spec,
                                  bool for_training, const SettingNames& names,
                                  ModelSettings& settings);

/// Each of the config's values within the range ir/ops.td declares for it, the first one
/// that is not named as its setting, quoted as `written` has it where it does (else exactly).
absl::Status checkOptimizerValues(const ir::OptimizerConfig& config, const SettingNames& names,
                                  const std::map<std::string, WrittenNumber>* written = nullptr);

}  // namespace tandem::training
