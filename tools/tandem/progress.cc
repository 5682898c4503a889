#include "tools/tandem/progress.h"

#include <cstdio>

#include "absl/strings/str_format.h"

namespace tandem::tools {

void ProgressBar::update(const std::string& label, int64_t done, int64_t total,
                         const std::string& note) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr int kWidth = 30;
  int filled = total > 0 ? static_cast<int>(kWidth * done / total) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r\033[K%s [%s] %lld/%lld  %s", label.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total), note.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace tandem::tools
