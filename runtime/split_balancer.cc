#include "runtime/split_balancer.h"

#include <algorithm>

namespace tandem::runtime {

SplitBalancer::SplitBalancer(size_t devices, Options options)
    : devices_(devices), options_(options), busy_ns_(devices, 0), rows_(devices, 0) {}

bool SplitBalancer::wantsTrace() const {
  return !settled_ && step_ >= options_.warmup_steps &&
         step_ < options_.warmup_steps + options_.measure_steps;
}

void SplitBalancer::restore(const State& s) {
  if (s.busy_ns.size() != devices_ || s.rows.size() != devices_) return;
  step_ = s.step;
  settled_ = s.settled;
  busy_ns_ = s.busy_ns;
  rows_ = s.rows;
}

double SplitBalancer::lastCriticalPathNs() const {
  return last_busy_.empty() ? 0 : *std::max_element(last_busy_.begin(), last_busy_.end());
}

std::optional<std::vector<double>> SplitBalancer::afterStep(const std::vector<TraceEntry>& trace,
                                                            const std::vector<int64_t>& rows) {
  if (settled_) return std::nullopt;
  const bool measured = wantsTrace();
  ++step_;
  if (!measured) return std::nullopt;
  // Compute streams only: the comm streams wait for each other by design.
  if (options_.busy_for_test) {
    for (size_t d = 0; d < devices_ && d < rows.size(); ++d)
      busy_ns_[d] += options_.busy_for_test(d, rows[d]);
  } else {
    for (const TraceEntry& e : trace)
      if (!e.comm && !e.prefetch && e.device < devices_)
        busy_ns_[e.device] += double(e.end_ns - e.start_ns);
  }
  for (size_t d = 0; d < devices_ && d < rows.size(); ++d) rows_[d] += double(rows[d]);
  if (step_ < options_.warmup_steps + options_.measure_steps) return std::nullopt;

  last_busy_.assign(devices_, 0);
  for (size_t d = 0; d < devices_; ++d) last_busy_[d] = busy_ns_[d] / options_.measure_steps;
  const auto [lo, hi] = std::minmax_element(last_busy_.begin(), last_busy_.end());
  std::optional<std::vector<double>> plan;
  if (*lo > 0 && *hi / *lo > options_.threshold) {
    // Images per busy second of each device: the next split gives each that share.
    std::vector<double> weights(devices_);
    for (size_t d = 0; d < devices_; ++d)
      weights[d] = busy_ns_[d] > 0 ? rows_[d] / busy_ns_[d] : 0;
    const double top = *std::max_element(weights.begin(), weights.end());
    for (double& w : weights) w = std::max(w / top, 1e-3);  // every device keeps a share
    plan = weights;
  } else {
    settled_ = true;
  }
  step_ = 0;
  std::fill(busy_ns_.begin(), busy_ns_.end(), 0);
  std::fill(rows_.begin(), rows_.end(), 0);
  return plan;
}

}  // namespace tandem::runtime
