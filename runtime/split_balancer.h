#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "runtime/executor.h"

namespace tandem::runtime {

/// `tandem train --split auto`: measures how long each device's compute stream is busy per
/// step and proposes a split of the global batch in proportion to each device's measured
/// speed, so that devices of unequal speed finish their share together. After a few
/// warm-up steps it measures a window of steps (traced); when the busiest device works
/// more than `threshold` times as long as the least busy one, it proposes new weights
/// (samples per device in proportion to images per second) and starts over; once within
/// the threshold it stops measuring. The gradients stay weighted by sample counts
/// (replicate's weights, the loss divided by the global batch), so a split changes where
/// the work runs, never what is computed.
class SplitBalancer {
 public:
  struct Options {
    int warmup_steps = 2;   // steps after a (re)plan before measuring: first touches, caches
    int measure_steps = 4;  // steps averaged
    double threshold = 1.10;
    /// Tests only: each device's busy nanoseconds for a step of `rows` images, in place of
    /// the trace, so that the decisions are known in advance (timing varies run to run).
    std::function<double(size_t device, int64_t rows)> busy_for_test;
  };
  /// Where the balancer stands: what a checkpoint keeps, so that a resumed run measures
  /// and decides at the steps the run it continues would have.
  struct State {
    int32_t step = 0;  // steps since the last plan
    bool settled = false;
    std::vector<double> busy_ns, rows;  // the window's sums so far, per device
    bool operator==(const State&) const = default;
  };
  SplitBalancer(size_t devices, Options options);
  explicit SplitBalancer(size_t devices) : SplitBalancer(devices, Options{}) {}

  /// Whether the next step should be traced (it falls in a measuring window).
  bool wantsTrace() const;
  /// True once a window measured the devices within the threshold.
  bool settled() const { return settled_; }

  /// After a step: its trace (empty when the step was not traced) and the rows each device
  /// had. Returns new per-device weights when the window just measured exceeds the
  /// threshold.
  std::optional<std::vector<double>> afterStep(const std::vector<TraceEntry>& trace,
                                               const std::vector<int64_t>& rows);

  /// Stops measuring, as a window within the threshold does (the caller found the proposed
  /// split is the one running already).
  void settle() { settled_ = true; }

  State state() const { return {step_, settled_, busy_ns_, rows_}; }
  /// Goes on from `s` (of a balancer over as many devices; another is ignored).
  void restore(const State& s);

  /// Busy nanoseconds per step of each device in the last measured window.
  const std::vector<double>& lastBusyNs() const { return last_busy_; }
  /// The step's critical path in that window: the busiest device's time.
  double lastCriticalPathNs() const;

 private:
  size_t devices_;
  Options options_;
  int32_t step_ = 0;  // steps since the last plan
  std::vector<double> busy_ns_, rows_;
  std::vector<double> last_busy_;
  bool settled_ = false;
};

}  // namespace tandem::runtime
