#pragma once

// The ranges of SGD's hyper-parameters, in one place for everything that takes them (the
// autodiff pass's options, the CLI's --lr, --momentum and --weight-decay), so that `opt`
// and `train` accept the same values. The update computes in f32 (sgd_update's kernels),
// so a value is also checked as f32 rounds it: an lr below f32's smallest normal number
// would be 0 there and train nothing, a momentum of 0.99999999 would be 1 and never
// forget, a positive weight decay below it would be none.

#include <string>

#include "absl/strings/string_view.h"

namespace tandem::passes {

enum class SgdHyperparameter { kLr, kMomentum, kWeightDecay };

/// "" when `v` is a valid value, else what is wrong with it, for a message after the
/// value's name: "must be > 0", "must be >= 0 and < 1", "must be >= 0 and <= 1",
/// "rounds to 1 in f32 (the update's arithmetic), which must be < 1", ...
std::string sgdValueProblem(SgdHyperparameter which, double v);

/// The range as text ("must be >= 0 and < 1"), for --help.
std::string sgdRangeText(SgdHyperparameter which);

}  // namespace tandem::passes
