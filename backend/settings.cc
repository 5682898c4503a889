#include "backend/settings.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::backend {
namespace {

struct SettingsRegistry {
  std::mutex mu;
  std::map<std::string, RegisteredSetting, std::less<>> by_name;
};

SettingsRegistry& settingsRegistry() {
  static SettingsRegistry* r = new SettingsRegistry();  // never destroyed, as the backends
  return *r;
}

const char* typeWords(const SettingSpec& spec) {
  switch (spec.type) {
    case SettingSpec::Type::kSwitch:
      return "true or false";
    case SettingSpec::Type::kNumber:
      return "a whole number";
    case SettingSpec::Type::kWord:
      return "a word";
  }
  return "";
}

bool hasType(const SettingSpec& spec, const SettingValue& value) {
  switch (spec.type) {
    case SettingSpec::Type::kSwitch:
      return std::holds_alternative<bool>(value);
    case SettingSpec::Type::kNumber:
      return std::holds_alternative<int64_t>(value);
    case SettingSpec::Type::kWord:
      return std::holds_alternative<std::string>(value);
  }
  return false;
}

bool sameValues(const SettingSpec& a, const SettingSpec& b) {
  return a.type == b.type && a.min == b.min && a.max == b.max && a.words == b.words;
}

}  // namespace

std::string toString(const SettingValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const int64_t* n = std::get_if<int64_t>(&value)) return absl::StrCat(*n);
  return absl::StrCat("'", std::get<std::string>(value), "'");
}

std::string valueProblem(const SettingSpec& spec, const SettingValue& value) {
  if (!hasType(spec, value)) return absl::StrCat("takes ", typeWords(spec), ", not ", toString(value));
  if (spec.type == SettingSpec::Type::kNumber) {
    const int64_t n = std::get<int64_t>(value);
    if (n < spec.min || n > spec.max)
      return absl::StrCat(n, " is out of range [", spec.min, ", ", spec.max, "]");
  }
  if (spec.type == SettingSpec::Type::kWord) {
    const std::string& w = std::get<std::string>(value);
    if (std::find(spec.words.begin(), spec.words.end(), w) == spec.words.end())
      return absl::StrCat("unknown word '", w, "' (expected ", absl::StrJoin(spec.words, ", "),
                          ")");
  }
  return "";
}

absl::Status checkValue(const SettingSpec& spec, const SettingValue& value) {
  const std::string problem = valueProblem(spec, value);
  if (problem.empty()) return absl::OkStatus();
  // "backend setting 'x' takes a word, not true", "backend setting 'x': 0 is out of range".
  const bool type = absl::StartsWith(problem, "takes ");
  return absl::InvalidArgumentError(
      absl::StrCat("backend setting '", spec.name, "'", type ? " " : ": ", problem));
}

absl::Status registerSettings(std::string_view kind, std::vector<SettingSpec> specs) {
  SettingsRegistry& r = settingsRegistry();
  std::lock_guard<std::mutex> l(r.mu);
  for (const SettingSpec& s : specs) {
    auto it = r.by_name.find(s.name);
    if (it != r.by_name.end() && !sameValues(it->second.spec, s))
      return absl::InternalError(absl::StrCat(
          "backend setting '", s.name, "' of ", std::string(kind), " takes other values than ",
          absl::StrJoin(it->second.kinds, ", "), "'s setting of that name"));
  }
  for (SettingSpec& s : specs) {
    auto it = r.by_name.find(s.name);
    if (it == r.by_name.end()) it = r.by_name.emplace(s.name, RegisteredSetting{s, {}}).first;
    std::vector<std::string>& kinds = it->second.kinds;
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.emplace_back(kind);
  }
  return absl::OkStatus();
}

std::vector<RegisteredSetting> registeredSettings() {
  SettingsRegistry& r = settingsRegistry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<RegisteredSetting> out;
  for (const auto& [name, s] : r.by_name) out.push_back(s);
  return out;
}

absl::Status checkSettings(const Settings& settings) {
  const std::vector<RegisteredSetting> known = registeredSettings();
  for (const auto& [name, value] : settings.values()) {
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const RegisteredSetting& s) { return s.spec.name == name; });
    if (it == known.end()) {
      std::vector<std::string> names;
      for (const RegisteredSetting& s : known) names.push_back(s.spec.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown backend setting '", name, "' (",
          names.empty() ? "no backend has registered settings: backend::registerBackends"
                        : absl::StrCat("the backends read ", absl::StrJoin(names, ", ")),
          ")"));
    }
    if (absl::Status s = checkValue(it->spec, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tandem::backend
