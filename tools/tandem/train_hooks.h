#pragma once

// Points of a training run where a test build of the CLI acts: a signal raised at a
// chosen step (a crash, a hang or a stop that must strike at a known point for the test
// to be deterministic) and a digest of the variables at the end (bit-for-bit comparisons
// of runs). The shipped `tandem` installs none: it reads no test-only setting and holds
// none of their names. The tests' build (tests/tools/tandem_with_test_hooks.cc) installs
// hooks before calling the same entry point.

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/executor.h"

namespace tandem::tools {

class TrainHooks {
 public:
  virtual ~TrainHooks() = default;
  /// After step `step` of `epoch` (and after any checkpoint it writes), on the host thread.
  virtual void afterStep(int epoch, int64_t step, runtime::Executor& executor) = 0;
  /// After the last epoch, on every rank.
  virtual absl::Status atEnd(const runtime::Executor& executor) = 0;
};

/// The hooks `tandem train` calls (null, the default: none). Set before the run.
void setTrainHooks(TrainHooks* hooks);
TrainHooks* trainHooks();

}  // namespace tandem::tools
