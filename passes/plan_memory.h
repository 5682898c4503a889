#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/plan.h"
#include "passes/pass.h"

namespace tandem::passes {

/// What planMemory did, counted in steps: one per node, operand and result it visits in
/// each sweep, per device of each collective, per bucket of its counting sorts and per
/// arena operation. Tests hold it linear in the graph's size (nodes x devices): the pass
/// once went cubic in the device count, and a step count says so without a clock.
struct PlanMemoryWork {
  int64_t steps = 0;
};

/// Plans one graph's memory (see PlanMemory) into `plan`, which holds the graph's streams
/// and events (the graph is in issue order). Adds the work done to `work` if given. Every
/// offset is a multiple of `alignment`; with `alias_views`, a view's result shares its
/// operand's bytes.
absl::Status planMemory(const ir::Module& m, const ir::Graph& g, ir::GraphPlan& plan,
                        PlanMemoryWork* work = nullptr, int64_t alignment = 64,
                        bool alias_views = true);

/// One buffer of a graph's arena as plan-memory sees it: a value's, or a kernel's
/// workspace (`result` unset), on device `device` (Module::devices() index), live from
/// position `first` to `last` of the graph's node order (both inclusive; the node count
/// for "until the step ends"), at `offset` for `bytes` (aligned) bytes.
struct ArenaBuffer {
  const ir::Node* node = nullptr;
  std::optional<size_t> result;
  size_t device = 0;
  int64_t first = 0, last = 0;
  int64_t offset = ir::GraphPlan::kNoOffset;
  int64_t bytes = 0;
};

/// Every arena buffer of `g`, which has a memory plan, with the lifetimes plan-memory
/// gives them (the same computation) and the offsets the plan holds: what `tandem explore`
/// draws of the arena, which buffers are live when. A view that shares its operand's bytes
/// is no buffer of its own: its operand's lives until the view's last reader.
absl::StatusOr<std::vector<ArenaBuffer>> arenaBuffers(const ir::Module& m, const ir::Graph& g);

/// `plan-memory{alignment=64, views=alias}`: gives every value an offset in its device's
/// arena (a multiple of `alignment`, what the devices' backends ask for), reusing a buffer
/// once its last reader is done, and completes each graph's plan with them and the arenas'
/// sizes (peak bytes are known before the step runs; `tandem dump --format memory`
/// prints them).
///
/// A view (reshape, flatten, flatten_backward: ir::isView) gets its operand's offset, the
/// operand's bytes then living until the view's last reader as well: its kernel's copy has
/// nothing to do, and the numbers are the same bits (the ViT makes two reshapes per
/// linear). `views=copy` gives each its own bytes, as before.
///
/// Lifetimes follow the plan's streams and events (plan-events): a value read on its own
/// device's compute stream lives from its node to its last such reader. A value a comm
/// share reads stays live until the first compute node of its device that waits for that
/// share or a later one of the comm stream (the events say which), because the comm
/// stream may still be reading it after the compute stream has moved on; one read on
/// another device's stream, until the step ends. A comm share's result is live from just
/// after the last compute node of its device it reads from, since the comm stream may
/// write it any time after that.
class PlanMemory final : public Pass {
 public:
  static constexpr absl::string_view kName = "plan-memory";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  PlanMemory(int64_t alignment, bool alias_views)
      : alignment_(alignment), alias_views_(alias_views) {}
  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  int64_t alignment_;
  bool alias_views_;
};

}  // namespace tandem::passes
