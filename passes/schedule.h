#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `schedule`: puts each graph in issue order for the runtime's two streams per device.
/// Work that waits for a gradient all_reduce (the optimizer updates, and anything else
/// reading a reduced value on a compute stream) moves after every node that does not, so
/// a device's compute stream runs the whole backward pass while the comm stream reduces
/// the finished buckets, instead of stalling at the first update. The relative order
/// within each part is kept, so the result is a topological order, every in-place write
/// stays after the reads before it, and collectives keep their order on every device.
class Schedule final : public Pass {
 public:
  static constexpr absl::string_view kName = "schedule";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
