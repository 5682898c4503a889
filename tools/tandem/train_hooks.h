#pragma once

// Points of the CLI where a test build acts: a signal raised at a chosen step of a training
// run (a crash, a hang or a stop that must strike at a known point for the test to be
// deterministic), a digest of the variables at the end (bit-for-bit comparisons of runs),
// devices' speeds fixed for --split auto (its re-plans known in advance, not timing's) and a
// shorter deadline for a child process (a gnuplot that never returns). The shipped `tandem`
// installs none: it reads no test-only setting and holds none of their names. The tests' build
// (tests/tools/tandem_with_test_hooks.cc) installs hooks before calling the same entry point.

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "runtime/executor.h"
#include "runtime/split_balancer.h"

namespace tandem::tools {

class TrainHooks {
 public:
  virtual ~TrainHooks() = default;
  /// After step `step` of `epoch` (and after any checkpoint it writes), on the host thread.
  virtual void afterStep(int epoch, int64_t step, runtime::Executor& executor) = 0;
  /// After the last epoch, on every rank.
  virtual absl::Status atEnd(const runtime::Executor& executor) = 0;
  /// --split auto's balancer, before the run: a test may fix what it measures.
  virtual void adjustBalancer(runtime::SplitBalancer::Options& options) { (void)options; }
  /// How long a child process (gnuplot) may run, when a test shortens it.
  virtual std::optional<double> childDeadlineSeconds() { return std::nullopt; }
};

/// The hooks `tandem train` calls (null, the default: none). Set before the run.
void setTrainHooks(TrainHooks* hooks);
TrainHooks* trainHooks();

}  // namespace tandem::tools
