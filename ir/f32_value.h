#pragma once

// Numbers a user gives for values the step computes with in f32 (a float attribute, an
// initializer's scale), checked as f32 will hold them.

#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace tandem::ir {

/// Why `v` is not what f32 will hold: "" when its f32 rounding is finite, not a denormal
/// and within the range (`in_range`); else "rounds to infinity in f32 (ARITHMETIC)",
/// "rounds to 0 in f32 (ARITHMETIC); give at least 1.17549e-38" ("0 or at least" where the
/// range has 0) or "rounds to 1 in f32 (ARITHMETIC), which RANGE_TEXT". Every numeric
/// setting that lands in f32 is checked by this one function, so that none is accepted as
/// a value it will not have.
std::string f32RoundingProblem(double v, const std::function<bool(double)>& in_range,
                               absl::string_view range_text, absl::string_view arithmetic);

}  // namespace tandem::ir
