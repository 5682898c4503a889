#pragma once

// The execution plan of a replicated graph: what the last passes of the pipeline decide
// and the runtime carries out, held beside the graph and printed and parsed with it
// (docs/IR.md, "The execution plan"):
//   assign-streams  which stream of its device runs each node's shares;
//   plan-events     the waits between streams: before a share runs, its stream waits for an
//                   event recorded after the share that wrote a value;
//   assign-layouts  which activations stay in their device's preferred layout (nChw16c on
//                   CPU, NHWC on CUDA) between the kernels that take it;
//   choose-algorithms  which of its ways each kernel that has a choice runs (a convolution
//                   pass on CPU: oneDNN plain or blocked, Winograd, im2col + matmul);
//   plan-memory     where each value lives in its device's arena, each arena's size, and
//                   each kernel's workspace (the scratch bytes its target declares).
// The loader and the simulator turn it into objects and derive nothing; the plan verifier
// (ir/plan_verifier.h) checks it after every pass and on every parsed module.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "ir/ir.h"
#include "ir/placement.h"
#include "ir/target.h"

namespace tandem::ir {

/// A value of the plan's graph, by its defining node's id and result index: ids survive
/// Module::clone, pointers would not.
struct ValueRef {
  uint32_t node = 0;
  uint32_t result = 0;
  bool operator==(const ValueRef&) const = default;
};

/// One device's arena: one allocation per device and graph, reused every step.
struct ArenaPlan {
  /// What the loader allocates.
  int64_t bytes = 0;
  /// The most bytes live at once (a lower bound for any placement; the arena exceeds it
  /// only by fragmentation).
  int64_t live_peak_bytes = 0;
  /// What the arena's buffers would take without reuse.
  int64_t unshared_bytes = 0;
  bool operator==(const ArenaPlan&) const = default;
};

/// A kernel's planned scratch memory (cuDNN/cuBLASLt workspaces, oneDNN scratchpads): bytes
/// of its device's arena that are its own only while the node runs, so the plan verifier's
/// race rules hold for them as for values, and the loader hands the kernel a view of them
/// instead of the kernel allocating (nothing allocates once a step may be recorded).
struct WorkspacePlan {
  int64_t offset = 0;
  int64_t bytes = 0;
  bool operator==(const WorkspacePlan&) const = default;
};

/// The plan of one node. Nodes that run nowhere (graph inputs, `param`) have an empty one.
struct NodePlan {
  /// assign-streams: the stream of its device each share runs on (unset for a node that
  /// runs nowhere, or one that came in without it: the plan verifier refuses those).
  std::optional<StreamKind> stream;
  /// plan-events: before each share runs, its stream waits for the share that wrote each
  /// of these values. A value names its writer's share (the one on the value's device),
  /// and the waiting share is the node's only share, or else its share on that device.
  std::vector<ValueRef> waits;
  /// plan-memory: the arena offset of each result; empty when its results are not arena
  /// memory (graph inputs come from the host, `param` results are variable storage).
  absl::InlinedVector<int64_t, 1> offsets;
  /// plan-memory: the node's workspace, when its target declares one (ir/target.h,
  /// TargetInfo::workspace_bytes).
  std::optional<WorkspacePlan> workspace;
  /// assign-layouts: the layout of each result; empty when every result is plain NCHW
  /// (most nodes, and every node of a plan without layouts).
  absl::InlinedVector<ActivationLayout, 8> layouts;
  /// choose-algorithms: the algorithm its kernel runs, a word of its target's
  /// (AlgorithmRules); empty: the kernel chooses when it is made (no choice to plan, or a
  /// plan without algorithms).
  std::string algorithm;

  /// The layout of result `r` (plain when none is planned).
  ActivationLayout layout(size_t r) const {
    return r < layouts.size() ? layouts[r] : ActivationLayout::kPlain;
  }
};

/// The parts of a plan, in the order the pipeline fills them.
enum class PlanPart : uint8_t {
  kStreams = 1,
  kEvents = 2,
  kLayouts = 8,
  kAlgorithms = 16,
  kMemory = 4
};
/// The parts in the order the pipeline fills them and the text lists them.
inline constexpr PlanPart kPlanParts[] = {PlanPart::kStreams, PlanPart::kEvents, PlanPart::kLayouts,
                                          PlanPart::kAlgorithms, PlanPart::kMemory};
/// "streams", "events", "layouts", "algorithms", "memory": how the text lists a part.
absl::string_view planPartName(PlanPart p);

/// The plan of one graph (Graph::plan()).
struct GraphPlan {
  /// graphFingerprint() of the graph when the plan was made: a different one now means
  /// the graph changed since, and the plan is stale.
  uint64_t fingerprint = 0;
  /// Which PlanParts it holds (bits).
  uint8_t parts = 0;
  /// Every offset is a multiple of this (what every device's backend needs); 0 before
  /// plan-memory.
  int64_t alignment = 0;
  /// By Node::id().
  std::vector<NodePlan> nodes;
  /// By device index (Module::devices()); empty before plan-memory.
  std::vector<ArenaPlan> arenas;

  bool has(PlanPart p) const { return (parts & static_cast<uint8_t>(p)) != 0; }
  void add(PlanPart p) { parts |= static_cast<uint8_t>(p); }
  const NodePlan& of(const Node& n) const { return nodes[n.id()]; }
  NodePlan& of(const Node& n) { return nodes[n.id()]; }
  /// The arena offset of `v`, or kNoOffset when it has none.
  int64_t offset(const Value& v) const;
  /// The layout of `v` (plain when the plan has no layouts).
  ActivationLayout layout(const Value& v) const;

  static constexpr int64_t kNoOffset = -1;
};

/// A stable hash of what a plan is computed from: the module's devices and, in order,
/// every node's op, attributes, placement, operands and result types, and the graph's
/// outputs, each as the text spells it. Names, scopes and source locations are left out
/// (they change nothing that runs). Stable across processes and builds, unlike
/// absl::Hash, so that it can be printed and read back.
uint64_t graphFingerprint(const Graph& g);
/// The same, handing `visit` each node in order as it hashes it: a pass that needs one
/// sweep over the nodes besides the fingerprint (assign-streams) makes it the same sweep.
uint64_t graphFingerprint(const Graph& g, absl::FunctionRef<void(const Node&)> visit);

/// OK when `g` has a plan holding `part`; else an error naming the graph and `pass`, the
/// pass that must run first. (The plan passes ask only this: whether the plan is still
/// the graph's is the verifier's question after every pass, and the loader's.)
absl::Status requirePlanPart(const Graph& g, PlanPart part, absl::string_view pass);
/// OK when the plan of `g` was made for the graph as it is now (its fingerprint); else a
/// "stale" error naming the graph.
absl::Status checkPlanFresh(const Graph& g);
/// Both: the plan holds `part` and is fresh.
absl::Status checkPlanFor(const Graph& g, PlanPart part, absl::string_view pass);

/// Whether view `n` (ir::isView: a reshape) can take its operand's arena bytes: one
/// result, and an operand that an arena holds (no source), on the same device, with as
/// many bytes. plan-memory gives such a view its operand's offset.
bool viewCanShareBytes(const Node& n);
/// Whether `plan` makes view `n` and its operand one buffer: `n` can share and its
/// result has its operand's offset. What plan-memory's lifetimes and the plan verifier's
/// race check read: the view's readers then keep its operand's bytes.
bool viewSharesBytes(const GraphPlan& plan, const Node& n);

/// The wait of one share of a node, as the executor makes it: before the share of
/// `consumer` on `at` runs, the share of `producer` on `from` must be done.
struct StreamWait {
  const Node* consumer;
  StreamSlot at;
  const Node* producer;
  StreamSlot from;
};

/// Every wait of the plan of `g` (which must hold events), in issue order. A wait whose
/// value or devices do not resolve is left out: the plan verifier reports those.
std::vector<StreamWait> streamWaits(const Module& m, const Graph& g);

/// How a stream listing names a node's work: compute work by its first result (or what it
/// updates), collectives by what they move ("all_reduce bucket 2", "split %x").
std::string describeWork(const Node& n);

/// "cpu:0/comm".
std::string slotName(const Module& m, const StreamSlot& s);
/// "compute", "comm".
absl::string_view streamName(StreamKind s);

/// The graph as the streams see it: per device and stream, the issue order with the waits
/// before each node (`tandem dump --format streams`). Needs a plan with events.
std::string printStreams(const Module& m, const Graph& g);

}  // namespace tandem::ir
