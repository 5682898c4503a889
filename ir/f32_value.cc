#include "ir/f32_value.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::ir {

std::string f32RoundingProblem(double v, const std::function<bool(double)>& in_range,
                               absl::string_view range_text, absl::string_view arithmetic) {
  const float f = static_cast<float>(v);
  const double smallest = std::numeric_limits<float>::min();  // 1.17549e-38
  if (std::isinf(f) && !std::isinf(v))
    return absl::StrCat("rounds to infinity in f32 (", arithmetic, ")");
  if (v != 0 && std::abs(f) < smallest)
    return absl::StrFormat("rounds to %s in f32 (%s); give %s %g", f == 0 ? "0" : "a denormal",
                           arithmetic, in_range(0) ? "0 or at least" : "at least", smallest);
  if (!in_range(f))
    return absl::StrFormat("rounds to %g in f32 (%s), which %s", f, arithmetic, range_text);
  return "";
}

}  // namespace tandem::ir
