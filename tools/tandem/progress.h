#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tandem::tools {

/// A one-line progress bar on standard error, redrawn at most ten times a second; silent
/// when standard error is not a terminal (logs get the per-epoch lines only).
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  /// "label [#####.....] done/total  note".
  void update(const std::string& label, int64_t done, int64_t total, const std::string& note);
  /// Erases the bar so the next line starts clean.
  void clear();

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace tandem::tools
