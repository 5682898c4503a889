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

absl::StatusOr<double> PassOptions::getDouble(absl::string_view key, double fallback) {
  used_.emplace_back(key);
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  double v = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return bad(key, absl::StrCat("must be a number, got '", s, "'"));
  return v;
}

absl::StatusOr<int64_t> PassOptions::getInt(absl::string_view key, int64_t fallback) {
  used_.emplace_back(key);
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  int64_t v = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return bad(key, absl::StrCat("must be an integer, got '", s, "'"));
  return v;
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
