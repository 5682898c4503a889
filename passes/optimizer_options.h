#pragma once

// The optimizer hyper-parameters as everything that takes them sees them (the autodiff
// pass's options, the CLI's --optimizer, --lr, --momentum, --weight-decay, --beta1,
// --beta2, --eps): which update op an optimizer name means, each value's range (the op's
// attribute range in ir/ops.td, so that `opt` and `train` accept the same values and say
// the same) and the defaults (the attributes' presets in ir/ops.td, where the model gives
// none).

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/attrs.h"
#include "ir/ir.h"
#include "ir/optimizer_configs.h"

namespace tandem::passes {

/// The optimizer update op `name` means: an op the spec declares an optimizer (single
/// form), by its name (adamw_update) or without "_update" (adamw, sgd). An error lists the
/// optimizers.
absl::StatusOr<ir::Op> optimizerByName(absl::string_view name);

/// The update op of a config: SgdConfig's sgd_update.
ir::Op optimizerOp(const ir::OptimizerConfig& config);

/// The config of optimizer update op `op` (its single form), each value its preset; an error
/// for an op that is not one.
absl::StatusOr<ir::OptimizerConfig> optimizerConfig(ir::Op op);

/// The config's hyper-parameters as (attribute, value), in its update op's order.
std::vector<std::pair<std::string, double>> hyperParameters(const ir::OptimizerConfig& config);

/// The config's learning rate (every optimizer op declares `lr`, which the schedule scales).
double learningRate(const ir::OptimizerConfig& config);

/// Sets hyper-parameter `attr` of the config; false when its optimizer has none of that name.
bool setHyperParameter(ir::OptimizerConfig& config, absl::string_view attr, double value);

/// The short name of an optimizer op: "sgd" for sgd_update.
std::string optimizerShortName(ir::Op op);

/// Every optimizer's short name, for messages: "adamw, sgd".
std::string optimizerNames();

/// The option or flag naming an attribute: weight_decay -> weight-decay.
std::string optionName(absl::string_view attr);

/// The default of hyper-parameter `attr` of `op` when neither the model nor the user gives
/// one: the attribute's `preset` in ir/ops.td (PyTorch's defaults; SGD's lr, which PyTorch
/// leaves to the user, 0.1); nullopt for an attribute without one.
std::optional<double> optimizerDefault(ir::Op op, absl::string_view attr);

/// The range of attribute `a` in words ("must be >= 0 and < 1"); a learning rate must also
/// be > 0 (0 trains nothing, although the update op itself allows it).
std::string optimizerRangeText(const ir::AttrSpec& a);

/// The range of hyper-parameter `attr` for --help: "must be > 0", or per optimizer where
/// they differ ("sgd: must be ...; adamw: must be ..."); with the optimizers that take it
/// when not all do ("adamw only: must be ...").
std::string optimizerRangeHelp(absl::string_view attr);

/// "" when `v` is a valid value of optimizer attribute `a`, else what is wrong, for a
/// message after the value: "must be > 0", "rounds to 1 in f32 (the update's arithmetic),
/// which must be < 1", ... Updates compute in f32, so a float is also checked as f32
/// rounds it: an lr below f32's smallest normal number would be 0 there and train nothing,
/// a momentum (or beta) of 0.99999999 would be 1 and never forget, a positive weight decay
/// below it would be none.
std::string optimizerValueProblem(const ir::AttrSpec& a, double v);

}  // namespace tandem::passes
