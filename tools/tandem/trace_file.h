#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/executor.h"
#include "tools/tandem/output_file.h"

namespace tandem::tools {

/// `train --trace FILE --trace-steps N`: traces N training steps after the warm-up and
/// writes them as a Chrome trace (runtime/chrome_trace.h) as soon as the last is in, so
/// the file can be opened while training goes on. A whole run's trace would be large and
/// mostly repeats; the first step is left out because it pays one-time costs (oneDNN
/// primitive caches, first touch of the arenas) that the steady state does not.
class TraceFile {
 public:
  static constexpr int64_t kWarmupSteps = 1;
  static constexpr int64_t kDefaultSteps = 3;

  /// Opens `path` now, so that a path that cannot be written fails before training
  /// (naming --trace). Standard output is refused: it carries the epoch table.
  static absl::StatusOr<TraceFile> open(const std::string& path, int64_t steps);

  /// Whether the executor should trace the next training step.
  bool wantsNextStep() const;
  /// After each training step: takes what `ex` traced since the last call, keeps the
  /// train_step entries of the steps in the window (and hands every entry to `profile`
  /// when not null, for --profile), writes the file when the window is complete, and
  /// turns tracing on or off for the next step.
  absl::Status afterStep(runtime::Executor& ex, std::vector<runtime::TraceEntry>* profile);
  /// At the end of the run: when the window was not complete (a short run, a stop), writes
  /// the steps traced so far and says so on standard error.
  absl::Status finish(const ir::Module& m);

 private:
  TraceFile(OutputFile file, OutputFile lock, std::string path, int64_t steps)
      : file_(std::move(file)), lock_(std::move(lock)), path_(std::move(path)), steps_(steps) {}
  absl::Status write(const ir::Module& m);

  OutputFile file_;
  // The path claimed (OutputFile::claim) for the run: a second run given it is refused,
  // and a file made for a run that wrote no trace goes again.
  OutputFile lock_;
  std::string path_;
  int64_t steps_;
  int64_t steps_done_ = 0;  // training steps run so far, traced or not
  int64_t steps_kept_ = 0;
  std::vector<runtime::TraceEntry> kept_;
  bool written_ = false;
};

}  // namespace tandem::tools
