#pragma once

#include <atomic>
#include <string>

namespace tandem::tools {

/// SIGINT (Ctrl-C) and SIGTERM (what `timeout`, a batch scheduler or `kill` sends) as a
/// request to stop cleanly: training finishes the step it is in, flushes its files, says
/// where it stopped and exits with 128 + the signal, as a shell reports a killed program.
/// Installed for the lifetime of the object; the previous handlers come back after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// True once a stop signal arrived.
  bool requested() const;
  /// The first signal that arrived (0 if none).
  int signal() const;
  /// "Ctrl-C (SIGINT)" or "SIGTERM".
  std::string name() const { return nameOf(signal()); }
  static std::string nameOf(int signal);
  /// 128 + signal: 130 for SIGINT, 143 for SIGTERM.
  int exitCode() const { return 128 + signal(); }
  /// signal() without an object, for a thread that may outlive it (the watchdog of
  /// backend/processes.h): 0 when none arrived or no StopSignals is installed.
  static int pending();
};

}  // namespace tandem::tools
