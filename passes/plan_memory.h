#pragma once

#include "absl/status/statusor.h"
#include "ir/memory_plan.h"
#include "passes/pass.h"

namespace tandem::passes {

/// What planMemory did, counted in steps: one per node, operand and result it visits in
/// each sweep, per device of each collective, per bucket of its counting sorts and per
/// arena operation. Tests hold it linear in the graph's size (nodes x devices): the pass
/// once went cubic in the device count, and a step count says so without a clock.
struct PlanMemoryWork {
  int64_t steps = 0;
};

/// Plans one graph's memory (see PlanMemory). The graph must be in issue order (after
/// `schedule`); the module gives the device list. Adds the work done to `work` if given.
/// Every offset is a multiple of `alignment`.
absl::StatusOr<ir::MemoryPlan> planMemory(const ir::Module& m, const ir::Graph& g,
                                          PlanMemoryWork* work = nullptr, int64_t alignment = 64);

/// `plan-memory{alignment=64}`: gives every value an offset in its device's arena (a
/// multiple of `alignment`, what the devices' backends ask for), reusing a buffer once
/// its last reader is done, and attaches the plan to each graph (peak bytes are known
/// before the step runs; `tandem dump --memory` prints them).
///
/// Lifetimes follow the two streams per device: a compute value lives from its node to
/// its last compute reader. A value a collective reads stays live until the first compute
/// node of that device that waits for that collective (or a later one on the same comm
/// stream), because the comm stream may still be reading it after the compute stream has
/// moved on. A collective's result is live from just after the last compute node it waits
/// for, since the comm stream may write it any time after that.
class PlanMemory final : public Pass {
 public:
  static constexpr absl::string_view kName = "plan-memory";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  explicit PlanMemory(int64_t alignment) : alignment_(alignment) {}
  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  int64_t alignment_;
};

}  // namespace tandem::passes
