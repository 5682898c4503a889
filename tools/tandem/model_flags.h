#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "runtime/data/example_source.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/onnx_model.h"
#include "train/model_settings.h"

namespace tandem::tools {

using ModelChoice = training::ModelChoice;

/// The model the flags name (a zoo model, or --onnx's), checked to exist. With `data`
/// (the training data) a zoo model is made for its images x and class labels, and an ONNX
/// model must take its images; without, a zoo model keeps its own. With --onnx `imported`
/// (when given) receives the values its initializers give the variables. Errors name the
/// flag.
absl::StatusOr<ModelSpec> modelSpecOfFlags(const ModelFlags& flags,
                                           const runtime::data::ExampleSource* data,
                                           std::shared_ptr<ImportedValues>* imported = nullptr);

/// The training settings the flags give: those written as text parsed (train/settings_text.h:
/// --devices, --split, --group-updates, --precision, --allreduce-dtype), the optimizer
/// --optimizer names (unset: `spec`'s) with the values --lr, --momentum, ... give. Errors
/// name the flag.
absl::StatusOr<training::ModelSettings> modelSettingsOfFlags(const ModelFlags& flags,
                                                             const ModelSpec& spec,
                                                             bool for_training);

/// Checks ModelFlags together (the model exists, devices parse, the batch covers them,
/// weights match them, the initializer parses) and fills in the model's defaults for what
/// was not given. `for_training`: a model for Fashion-MNIST's images (above). Errors
/// name the flag.
/// With --onnx the model is the ONNX file's (onnx_model.h), and `imported` (when given)
/// receives the values its initializers give the variables.
absl::StatusOr<ModelChoice> resolveModelFlags(const ModelFlags& flags, bool for_training,
                                              std::shared_ptr<ImportedValues>* imported = nullptr);

/// The tokens per example a language model of the flags reads (--context, or the model's
/// default): the text data's window length. 0 for any other model.
int64_t contextOfFlags(const ModelFlags& flags);

/// What to say about a flag of `flags` that changes nothing in `compiled` ("" when each
/// does something): --sync-bn with one device in all, or with a model without batch norm.
std::string inertModelFlagWarning(const ModelFlags& flags, const ir::Module& compiled);

}  // namespace tandem::tools
