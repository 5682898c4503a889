#pragma once

// A discrete-event replay of one device's two streams (compute, comm) over a step's issue
// order: each piece of work starts when its stream is free and the work on the other
// stream it waits for is done, as the executor's events order it.

#include <cstddef>
#include <string>
#include <vector>

namespace tandem::sim {

/// One piece of work in issue order.
struct SimOp {
  std::string name;
  bool comm = false;  // on the comm stream, else the compute stream
  double seconds = 0;
  /// Indices of earlier ops on the other stream this one waits for (same-stream order is
  /// the FIFO's).
  std::vector<size_t> waits;
};

struct SimResult {
  double step_s = 0;     // when the last op ends
  double compute_s = 0;  // busy time of the compute stream
  double comm_s = 0;     // busy time of the comm stream
  /// Step time the compute stream does not cover: communication that did not overlap,
  /// and compute stalled on it. step_s - compute_s.
  double exposed_comm_s = 0;
  std::vector<double> start_s, end_s;  // per op
};

/// Replays `ops` (in issue order; a wait on a later op is a caller bug and is ignored).
SimResult simulateStreams(const std::vector<SimOp>& ops);

}  // namespace tandem::sim
