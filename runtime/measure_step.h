#pragma once

// Per-node costs measured by running a compiled step: it runs a few times under the
// executor's trace, and each node's share on device 0 gets its median time. `tandem
// simulate --gpu cpu` measures on this machine's CPU devices and hands the times to the
// simulator (sim/, which runs nothing itself), printing the measured step beside the
// prediction.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/executor.h"

namespace tandem::runtime {

struct StepMeasurement {
  /// The executor that ran; its module() is the one the times belong to.
  std::unique_ptr<Executor> executor;
  /// Median seconds of each train_step node's share on device 0, by Node::id() (0 for
  /// nodes device 0 does not run).
  std::vector<double> node_seconds;
  /// Median wall time of a whole step as the host sees it (Executor::run).
  double step_s = 0;
};

/// Loads `module` on its devices' backends, runs @init, then `warmup` + `steps` train
/// steps on zero-filled inputs (timing does not depend on the values) and measures them.
absl::StatusOr<StepMeasurement> measureStep(std::unique_ptr<ir::Module> module, int warmup,
                                            int steps);

}  // namespace tandem::runtime
