#pragma once

// Per-node costs measured on this machine's CPU backend: the compiled step runs a few
// times under the executor's trace, and each node's share on device 0 gets its median
// time. `tandem simulate --gpu cpu` replays the schedule with them and prints the
// measured step beside the prediction.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/executor.h"

namespace tandem::sim {

struct CpuMeasurement {
  /// The executor that ran; its module() is the one the times belong to.
  std::unique_ptr<runtime::Executor> executor;
  /// Median seconds of each train_step node's share on device 0, by Node::id() (0 for
  /// nodes device 0 does not run).
  std::vector<double> node_seconds;
  /// Median wall time of a whole step as the host sees it (Executor::run).
  double step_s = 0;
};

/// Loads `module` on the CPU backend, runs @init, then `warmup` + `steps` train steps on
/// zero-filled inputs (timing does not depend on the values) and measures them.
absl::StatusOr<CpuMeasurement> measureCpuStep(std::unique_ptr<ir::Module> module, int warmup,
                                              int steps);

}  // namespace tandem::sim
