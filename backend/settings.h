#pragma once

// Backend settings by name. A front end says what it wants ("threads_per_device" = 4,
// "allow_tf32" = false) without naming a backend; each backend registers the settings it
// reads (a SettingSpec each: name, one line of doc, its type and range) and reads them into
// its own typed options struct through an OptionsSchema (backend/cpu/cpu_options.h). A
// setting two backends read (conv_algorithm) is one name. The executor checks every
// setting against the registered ones before it makes a device (checkSettings): an unknown
// name, a value of the wrong type or out of range is an error naming the setting.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::backend {

/// A setting's value: a switch, a whole number, or a word (an enumeration's name).
using SettingValue = std::variant<bool, int64_t, std::string>;

/// The settings a front end gives the backends of a run, by name; a backend reads those
/// it registered and leaves the rest to the others.
class Settings {
 public:
  Settings() = default;
  Settings(std::initializer_list<std::pair<const std::string, SettingValue>> values)
      : values_(values) {}
  /// Sets `name`, replacing a value set before.
  Settings& set(std::string name, SettingValue value) {
    values_.insert_or_assign(std::move(name), std::move(value));
    return *this;
  }
  /// The value of `name`, or null where none was set (the backend's default).
  const SettingValue* find(std::string_view name) const {
    auto it = values_.find(name);
    return it != values_.end() ? &it->second : nullptr;
  }
  const std::map<std::string, SettingValue, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, SettingValue, std::less<>> values_;
};

/// One setting a backend reads: what a front end may set and what values it takes.
struct SettingSpec {
  enum class Type { kSwitch, kNumber, kWord };
  std::string name;  // "threads_per_device": lower case, words joined by '_'
  std::string doc;   // one line
  Type type = Type::kSwitch;
  int64_t min = 0, max = 0;        // kNumber: the range, both ends included
  std::vector<std::string> words;  // kWord: the words it takes
};

/// What is wrong with `value` for `spec` ("0 is out of range [1, 1024]", "takes true or
/// false, not 4"), or "" when it is of the type and within the range or words: for a caller
/// that names the setting in its own words.
std::string valueProblem(const SettingSpec& spec, const SettingValue& value);

/// Whether `value` is of `spec`'s type and within its range or words; the error names the
/// setting ("backend setting 'threads_per_device': 0 is out of range [1, 1024]").
absl::Status checkValue(const SettingSpec& spec, const SettingValue& value);

/// A value as a user would write it: true, 4, 'direct'.
std::string toString(const SettingValue& value);

/// Registers the settings the backend of `kind` reads (also where the build has no such
/// backend: a front end's settings for it are then legal and read by none). A name two
/// backends register must have the same type and range or words in both. Idempotent per
/// kind.
absl::Status registerSettings(std::string_view kind, std::vector<SettingSpec> specs);

/// A registered setting and the kinds whose backends read it, in registration order.
struct RegisteredSetting {
  SettingSpec spec;
  std::vector<std::string> kinds;
};
/// Every registered setting, by name.
std::vector<RegisteredSetting> registeredSettings();

/// Checks every setting in `settings` against the registered ones: an unknown name (with
/// the names there are), a value of another type or out of range is an error naming it.
absl::Status checkSettings(const Settings& settings);

/// A backend's options struct T and the settings that fill it, one field each: what the
/// backend registers (specs()) and how it reads its options from a run's settings (read()).
template <typename T>
class OptionsSchema {
 public:
  /// A bool field.
  OptionsSchema& flag(std::string name, std::string doc, bool T::*field) {
    specs_.push_back({std::move(name), std::move(doc), SettingSpec::Type::kSwitch});
    apply_.push_back([field](T& o, const SettingValue& v) { o.*field = std::get<bool>(v); });
    return *this;
  }
  /// An int field in [min, max].
  OptionsSchema& number(std::string name, std::string doc, int T::*field, int min, int max) {
    specs_.push_back({std::move(name), std::move(doc), SettingSpec::Type::kNumber, min, max});
    apply_.push_back([field](T& o, const SettingValue& v) {
      o.*field = static_cast<int>(std::get<int64_t>(v));
    });
    return *this;
  }
  /// An enumeration field, one word per value.
  template <typename E>
  OptionsSchema& word(std::string name, std::string doc, E T::*field,
                      std::vector<std::pair<std::string, E>> words) {
    SettingSpec spec{std::move(name), std::move(doc), SettingSpec::Type::kWord};
    for (const auto& [w, e] : words) spec.words.push_back(w);
    specs_.push_back(std::move(spec));
    apply_.push_back([field, words = std::move(words)](T& o, const SettingValue& v) {
      for (const auto& [w, e] : words)
        if (w == std::get<std::string>(v)) o.*field = e;
    });
    return *this;
  }

  const std::vector<SettingSpec>& specs() const { return specs_; }

  /// T's defaults with the settings it reads from `settings` (null: none) applied; an
  /// error names a setting whose value is of another type or out of range. Settings of
  /// other backends are not its business.
  absl::StatusOr<T> read(const Settings* settings) const {
    T o{};
    if (settings == nullptr) return o;
    for (size_t i = 0; i < specs_.size(); ++i) {
      const SettingValue* v = settings->find(specs_[i].name);
      if (v == nullptr) continue;
      if (absl::Status s = checkValue(specs_[i], *v); !s.ok()) return s;
      apply_[i](o, *v);
    }
    return o;
  }

 private:
  std::vector<SettingSpec> specs_;
  std::vector<std::function<void(T&, const SettingValue&)>> apply_;
};

}  // namespace tandem::backend
