#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "tools/driver/compile.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/onnx_model.h"

namespace tandem::tools {

/// A model and how to compile it, resolved from ModelFlags.
struct ModelChoice {
  ModelSpec spec;
  driver::CompileOptions compile;
  /// --split auto: start even, then re-plan from measured device speeds (train only).
  bool auto_split = false;
  /// The learning-rate schedule: --schedule, or the model's.
  std::string schedule = "constant";
  /// --warmup in steps; unset: the model's warmup_epochs, in steps once an epoch's length
  /// is known (warmupSteps).
  std::optional<int64_t> warmup_steps;
  int64_t warmup_epochs = 0;
  /// --onnx: the values the model's initializers give its variables (written after @init
  /// unless --reinit); null for a zoo model.
  std::shared_ptr<ImportedValues> imported_values;

  int64_t warmupSteps(int64_t steps_per_epoch) const {
    return warmup_steps.value_or(warmup_epochs * steps_per_epoch);
  }
  /// "5" or "1 epoch": the warmup as settings lists compare it, before the data is read.
  std::string warmupText() const;
};

/// The zoo models `tandem train` can train: those taking Fashion-MNIST's 1x28x28 images.
std::vector<std::string> trainableModelNames();

/// Checks ModelFlags together (the model exists, devices parse, the batch covers them,
/// weights match them, the initializer parses) and fills in the model's defaults for what
/// was not given. `for_training` also requires a model for Fashion-MNIST images. Errors
/// name the flag.
absl::StatusOr<ModelChoice> resolveModelFlags(const ModelFlags& flags, bool for_training);

/// What to say about a flag of `flags` that changes nothing in `compiled` ("" when each
/// does something): --sync-bn with one device in all, or with a model without batch norm.
std::string inertModelFlagWarning(const ModelFlags& flags, const ir::Module& compiled);

}  // namespace tandem::tools
