#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem::passes {

/// The options written in a pipeline, `replicate{devices=[cpu:0,cpu:1]}`. Getters check
/// the text and name the pass and option on error; finish() rejects unknown options.
class PassOptions {
 public:
  PassOptions() = default;
  PassOptions(std::string pass, std::map<std::string, std::string> values)
      : pass_(std::move(pass)), values_(std::move(values)) {}

  bool has(absl::string_view key) const { return values_.contains(std::string(key)); }
  absl::StatusOr<double> getDouble(absl::string_view key, double fallback);
  absl::StatusOr<int64_t> getInt(absl::string_view key, int64_t fallback);
  absl::StatusOr<std::string> getString(absl::string_view key, std::string fallback);
  /// "[1,2,3]" or "1,2,3".
  absl::StatusOr<std::vector<double>> getDoubleList(absl::string_view key);
  /// Errors for every option no getter asked about.
  absl::Status finish() const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  absl::Status bad(absl::string_view key, absl::string_view why) const;
  /// Parses option `key` as a T ("a number", "an integer" name it in errors).
  template <typename T>
  absl::StatusOr<T> getNumber(absl::string_view key, T fallback, absl::string_view what);
  std::string pass_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> used_;
};

/// A module-to-module rewrite. Small, named, and testable alone on text IR.
class Pass {
 public:
  virtual ~Pass() = default;
  /// Kebab-case name used in pipelines ("insert-collectives").
  virtual absl::string_view name() const = 0;
  /// Runs the pass; returns whether the module changed. Errors name what was wrong.
  virtual absl::StatusOr<bool> run(ir::Module& m) = 0;
  /// The options as a pipeline would spell them, for printing ("{devices=[cpu:0]}" or "").
  virtual std::string optionsText() const { return ""; }
};

}  // namespace tandem::passes
