#include <algorithm>
#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "passes/pass.h"

namespace tandem::passes {

absl::Status PassOptions::bad(absl::string_view key, absl::string_view why) const {
  return absl::InvalidArgumentError(absl::StrCat("pass ", pass_, ": option '", key, "' ", why));
}

template <typename T>
absl::StatusOr<T> PassOptions::getNumber(absl::string_view key, T fallback,
                                         absl::string_view what) {
  used_.emplace_back(key);
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  T v{};
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return bad(key, absl::StrCat("must be ", what, ", got '", s, "'"));
  return v;
}

absl::StatusOr<double> PassOptions::getDouble(absl::string_view key, double fallback) {
  return getNumber<double>(key, fallback, "a number");
}

absl::StatusOr<int64_t> PassOptions::getInt(absl::string_view key, int64_t fallback) {
  return getNumber<int64_t>(key, fallback, "an integer");
}

absl::StatusOr<std::string> PassOptions::getString(absl::string_view key, std::string fallback) {
  used_.emplace_back(key);
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  return it->second;
}

absl::StatusOr<std::vector<double>> PassOptions::getDoubleList(absl::string_view key) {
  used_.emplace_back(key);
  std::vector<double> out;
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return out;
  absl::string_view s = it->second;
  absl::ConsumePrefix(&s, "[");
  absl::ConsumeSuffix(&s, "]");
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    part = absl::StripAsciiWhitespace(part);
    double v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size())
      return bad(key, absl::StrCat("must be a list of numbers, got '", it->second, "'"));
    out.push_back(v);
  }
  return out;
}

absl::Status PassOptions::finish() const {
  for (const auto& [key, value] : values_)
    if (std::find(used_.begin(), used_.end(), key) == used_.end())
      return absl::InvalidArgumentError(
          absl::StrCat("pass ", pass_, " has no option '", key, "'",
                       used_.empty() ? " (it takes none)"
                                     : absl::StrCat(" (known: ", absl::StrJoin(used_, ", "), ")")));
  return absl::OkStatus();
}

}  // namespace tandem::passes
