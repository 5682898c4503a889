#include "tools/tandem/setting_flags.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem::tools {

std::string FlagNames::name(training::Setting s) const {
  using training::Setting;
  switch (s) {
    case Setting::kModel:
      return onnx_ ? "--onnx" : "--model";
    case Setting::kStopAfter:  // dump's
      return "--after";
    default:
      break;
  }
  // Every other flag is its setting's key in kebab case: weight_decay is --weight-decay.
  std::string flag = absl::StrCat("--", training::settingKey(s));
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

}  // namespace tandem::tools
