#include "train/settings_text.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/backends.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "passes/optimizer_options.h"

namespace tandem::training {
namespace {

// The setting of an optimizer attribute as the front end names it; an attribute no setting
// sets, by its own name.
std::string hyperName(absl::string_view attr, const SettingNames& names) {
  Setting s;
  return settingOfKey(attr, &s) ? names(s) : std::string(attr);
}

}  // namespace

absl::StatusOr<std::vector<ir::Device>> parseDevicesSetting(absl::string_view text,
                                                            const SettingNames& names) {
  backend::registerBackends();  // the device kinds this build knows
  absl::StatusOr<std::vector<ir::Device>> devices = ir::parseTargetDevices(text);
  if (!devices.ok()) return settingError(names, Setting::kDevices, devices.status().message());
  return devices;
}

absl::StatusOr<Split> parseSplitSetting(absl::string_view text, bool for_training,
                                        const SettingNames& names) {
  if (text == "even") return Split::even();
  if (text == "auto") return Split::measured();  // resolveModel refuses it but to train
  std::vector<double> weights;
  for (absl::string_view w : absl::StrSplit(text, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(w, &v) || !(v > 0) || !std::isfinite(v))
      return settingError(names, Setting::kSplit,
                          absl::StrCat("'", text, "' is not even", for_training ? ", auto, " : " ",
                                       "or positive weights such as 3,1"));
    weights.push_back(v);
  }
  return Split::byWeights(std::move(weights));
}

absl::StatusOr<std::optional<bool>> parseGroupUpdatesSetting(absl::string_view text,
                                                             const SettingNames& names) {
  if (text == "auto") return std::optional<bool>();
  if (text == "on" || text == "off") return std::optional<bool>(text == "on");
  return settingError(names, Setting::kGroupUpdates,
                      absl::StrCat("'", text, "' is not auto, on or off"));
}

absl::StatusOr<ir::FloatType> parseFloatTypeSetting(Setting setting, absl::string_view text,
                                                    const SettingNames& names) {
  if (std::optional<ir::FloatType> t = ir::parseFloatType(text)) return *t;
  return settingError(names, setting,
                      absl::StrCat("'", text, "' is not a dtype Tandem trains in: f32 or bf16"));
}

absl::Status checkOptimizerValues(const ir::OptimizerConfig& config, const SettingNames& names,
                                  const std::map<std::string, WrittenNumber>* written) {
  const ir::OpInfo& info = ir::opInfo(passes::optimizerOp(config));
  for (const auto& [attr, value] : passes::hyperParameters(config)) {
    const std::string problem =
        passes::optimizerValueProblem(info.attrs[static_cast<size_t>(info.attrIndex(attr))], value);
    if (problem.empty()) continue;
    std::string text = exactNumber(value);
    if (written != nullptr)
      if (auto it = written->find(attr); it != written->end()) text = it->second.text;
    return absl::InvalidArgumentError(
        absl::StrCat(hyperName(attr, names), ": ", text,
                     absl::StartsWith(problem, "must ") ? " is out of range: " : " ", problem));
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::OptimizerConfig> chooseOptimizer(
    const ir::OptimizerConfig& model_default, const std::optional<std::string>& name,
    const std::map<std::string, WrittenNumber>& given, const SettingNames& names) {
  ir::OptimizerConfig config = model_default;
  if (name) {
    absl::StatusOr<ir::Op> op = passes::optimizerByName(*name);
    if (!op.ok()) return settingError(names, Setting::kOptimizer, op.status().message());
    // The model's values are for its own optimizer; another one starts from its presets.
    if (*op != passes::optimizerOp(model_default)) {
      ASSIGN_OR_RETURN(config, passes::optimizerConfig(*op));
    }
  }
  for (const auto& [attr, number] : given)
    if (!passes::setHyperParameter(config, attr, number.value)) {
      std::vector<std::string> takes;
      for (const auto& [own, value] : passes::hyperParameters(config))
        takes.push_back(hyperName(own, names));
      return absl::InvalidArgumentError(
          absl::StrCat(hyperName(attr, names), ": not a setting of ", names(Setting::kOptimizer),
                       " ", passes::optimizerShortName(passes::optimizerOp(config)), " (it takes ",
                       absl::StrJoin(takes, ", "), ")"));
    }
  RETURN_IF_ERROR(checkOptimizerValues(config, names, &given));
  return config;
}

absl::Status parseWrittenSettings(const WrittenSettings& w, const ModelSpec& spec,
                                  bool for_training, const SettingNames& names, ModelSettings& s) {
  ASSIGN_OR_RETURN(s.devices, parseDevicesSetting(w.devices, names));
  ASSIGN_OR_RETURN(s.split, parseSplitSetting(w.split, for_training, names));
  if (w.optimizer || !w.hyper.empty()) {
    ASSIGN_OR_RETURN(s.optimizer,
                     chooseOptimizer(spec.defaults.optimizer, w.optimizer, w.hyper, names));
  }
  ASSIGN_OR_RETURN(s.group_updates, parseGroupUpdatesSetting(w.group_updates, names));
  ASSIGN_OR_RETURN(s.precision, parseFloatTypeSetting(Setting::kPrecision, w.precision, names));
  ASSIGN_OR_RETURN(s.allreduce_dtype,
                   parseFloatTypeSetting(Setting::kAllreduceDtype, w.allreduce_dtype, names));
  return absl::OkStatus();
}

}  // namespace tandem::training
