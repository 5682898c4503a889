#include "passes/sgd_hyperparameters.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::passes {
namespace {

struct Range {
  double min, max;
  bool min_open, max_open;
};

Range rangeOf(SgdHyperparameter which) {
  switch (which) {
    case SgdHyperparameter::kLr:
      return {0, std::numeric_limits<double>::infinity(), true, true};
    case SgdHyperparameter::kMomentum:
      return {0, 1, false, true};
    case SgdHyperparameter::kWeightDecay:
      return {0, 1, false, false};
  }
  return {0, 0, false, false};
}

bool inside(const Range& r, double v) {
  return (r.min_open ? v > r.min : v >= r.min) && (r.max_open ? v < r.max : v <= r.max);
}

}  // namespace

std::string sgdRangeText(SgdHyperparameter which) {
  const Range r = rangeOf(which);
  const std::string lo = absl::StrCat(r.min_open ? "> " : ">= ", r.min);
  if (std::isinf(r.max)) return absl::StrCat("must be ", lo);
  return absl::StrCat("must be ", lo, " and ", r.max_open ? "< " : "<= ", r.max);
}

std::string sgdValueProblem(SgdHyperparameter which, double v) {
  const Range r = rangeOf(which);
  if (!std::isfinite(v) || !inside(r, v)) return sgdRangeText(which);
  const float f = static_cast<float>(v);
  const double smallest = std::numeric_limits<float>::min();  // 1.17549e-38
  if (std::isinf(f)) return "rounds to infinity in f32 (the update's arithmetic)";
  if (v > 0 && f < smallest)
    return absl::StrFormat(
        "rounds to %s in f32 (the update's arithmetic)%s; give %s %g", f == 0 ? "0" : "a denormal",
        which == SgdHyperparameter::kLr ? ", which trains nothing" : "",
        which == SgdHyperparameter::kLr ? "at least" : "0 or at least", smallest);
  if (!inside(r, f))
    return absl::StrFormat("rounds to %g in f32 (the update's arithmetic), which %s", f,
                           sgdRangeText(which));
  return "";
}

}  // namespace tandem::passes
