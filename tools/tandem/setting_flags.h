#pragma once

// `tandem train`'s words for the training library's settings: the one table from a setting
// (train/setting.h) to the flag that gives it.

#include <string>

#include "train/setting.h"

namespace tandem::tools {

class FlagNames final : public training::SettingNames {
 public:
  /// `onnx`: the model came from --onnx rather than --model.
  explicit FlagNames(bool onnx = false) : onnx_(onnx) {}
  std::string name(training::Setting s) const override;

 private:
  bool onnx_;
};

}  // namespace tandem::tools
