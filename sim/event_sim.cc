#include "sim/event_sim.h"

#include <algorithm>

namespace tandem::sim {

SimResult simulateStreams(const std::vector<SimOp>& ops) {
  SimResult r;
  r.start_s.resize(ops.size());
  r.end_s.resize(ops.size());
  // Issue order is a topological order of both streams together, so one pass in it is the
  // event simulation: no op can wait for one not yet placed.
  double free_at[2] = {0, 0};
  for (size_t i = 0; i < ops.size(); ++i) {
    const SimOp& op = ops[i];
    double start = free_at[op.comm];
    for (size_t w : op.waits)
      if (w < i) start = std::max(start, r.end_s[w]);
    r.start_s[i] = start;
    r.end_s[i] = start + op.seconds;
    free_at[op.comm] = r.end_s[i];
    (op.comm ? r.comm_s : r.compute_s) += op.seconds;
    r.step_s = std::max(r.step_s, r.end_s[i]);
  }
  r.exposed_comm_s = std::max(0.0, r.step_s - r.compute_s);
  return r;
}

}  // namespace tandem::sim
