#pragma once

// The interfaces passes and the runtime ask instead of naming ops, declared per op in the
// spec (ir/ops.td):
// - optimizer updates (`optimizer` and `state` lines): which operands are the trained
//   weight, its gradient and its state, what the state is initialized to, and the op's
//   multi-tensor grouped form. insert-collectives, group-updates, mixed-precision,
//   autodiff and the verifier handle every optimizer through UpdateView.
// - collectives (`collective` line): what kind of collective, which operands each device
//   of the `devices` list reads and which results it writes, the groups, and which
//   communicator call runs it. Placement, the verifier, stream waits, the loader, the
//   executor, the simulator and the DOT views ask CollectiveView.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem::ir {

// ---- optimizer updates ----------------------------------------------------------------

/// One state operand of an optimizer (SGD's momentum buffer, AdamW's moments).
struct OptimizerStateSpec {
  size_t operand = 0;  // in the single form
  Initializer::Kind init = Initializer::Kind::kZeros;
  /// The state variable of parameter @p is @p.<var_suffix>, of p's type, role optimizer.
  absl::string_view var_suffix;
  /// Index of a float attribute: the state exists only where it is > 0 (SGD's momentum);
  /// -1: always.
  int when_attr = -1;
  /// An f32[1] per parameter instead of the weight's type: a count (AdamW's step, kept per
  /// parameter as PyTorch 1.13 keeps state['step'], so that a checkpoint carries it).
  bool scalar = false;

  /// The state variable's type for a parameter of type `param`.
  TensorType typeFor(const TensorType& param) const {
    return scalar ? TensorType{DType::kF32, {1}} : param;
  }
};

/// What the spec's `optimizer` line says. A grouped form carries its single form's facts.
struct OptimizerInfo {
  size_t param = 0, grad = 1;  // operand indices in the single form
  std::vector<OptimizerStateSpec> states;
  size_t operands = 0;           // of the single form
  /// Takes an optional f32[1] learning-rate factor (the schedule's, fed every step) after
  /// every per-parameter operand: the update uses lr * factor.
  bool lr_scale = false;
  std::optional<Op> grouped;     // the multi-tensor form of a single-parameter op
  std::optional<Op> grouped_of;  // set on the grouped form: the op it groups
  /// The flat-shard form (shard-weight-update): the same operands over one device's shard
  /// of a bucket, the weight shard a value, and the updated shard its result.
  std::optional<Op> sharded;
  std::optional<Op> sharded_of;  // set on the flat-shard form: the op it shards
};

/// The optimizer update of a node: k parameters (1 for the single form; a grouped form's
/// operands are k weights, k gradients, then k of each present state).
class UpdateView {
 public:
  /// The view of `n`, or nullopt when `n` is no optimizer update.
  static std::optional<UpdateView> of(const Node& n);
  static bool is(const Node& n) { return n.info().has(kOptimizer); }

  const Node& node() const { return *n_; }
  const OptimizerInfo& info() const { return *info_; }
  bool grouped() const { return info_->grouped_of.has_value(); }
  /// k; 0 when a grouped node's operand count does not fit its states (the shape rule
  /// says so).
  size_t numParams() const { return k_; }
  /// The states present on this node (those whose `when` attribute holds).
  const std::vector<size_t>& presentStates() const { return present_; }
  /// 2 + the present states: operands per parameter.
  size_t streams() const { return 2 + present_.size(); }

  size_t paramOperand(size_t j) const { return grouped() ? j : info_->param; }
  size_t gradOperand(size_t j) const { return grouped() ? k_ + j : info_->grad; }
  /// Operand of present state `s` (an index into presentStates()) of parameter j.
  size_t stateOperand(size_t j, size_t s) const {
    return grouped() ? (2 + s) * k_ + j : info_->states[present_[s]].operand;
  }
  Value* param(size_t j) const { return n_->operand(paramOperand(j)); }
  Value* grad(size_t j) const { return n_->operand(gradOperand(j)); }
  /// The learning-rate factor operand (the last one), or SIZE_MAX / null without it.
  size_t lrScaleOperand() const { return lr_scale_; }
  Value* lrScale() const { return lr_scale_ == SIZE_MAX ? nullptr : n_->operand(lr_scale_); }

  /// Whether state `s` of the spec exists on a node with attributes `attrs`.
  static bool statePresent(const OptimizerStateSpec& s, const std::vector<AttrValue>& attrs);

 private:
  explicit UpdateView(const Node& n);
  const Node* n_;
  const OptimizerInfo* info_;
  std::vector<size_t> present_;
  size_t k_ = 1;
  size_t lr_scale_ = SIZE_MAX;
};

/// Whether `v` is a param read of a variable of role fed (such as @lr_scale).
bool readsFedVariable(const Value& v);

/// The gradients an optimizer update reads (k of them); none for any other node.
std::vector<const Value*> updateGradients(const Node& n);

// ---- variables ------------------------------------------------------------------------

/// The variable a node names (its `symbol` attribute: param, initialize, assign), or null.
const std::string* variableOf(const Node& n);

// ---- collectives ----------------------------------------------------------------------

enum class CollectiveKind : uint8_t {
  kReduce,         // every device gets its group's reduction (all_reduce)
  kBroadcast,      // every device gets its group's source's tensors
  kScatter,        // slices of a host tensor, one per device (split)
  kGather,         // one slice from every device onto one device (concat)
  kReduceScatter,  // every device gets its shard of its group's reduction (reduce_scatter)
  kAllGather,      // every device gets its group's shards concatenated (all_gather)
};
/// Which operands the device at a position of `devices` reads.
enum class CollectiveReads : uint8_t {
  kPerDevice,      // operands grouped by device, k each, in `devices` order
  kGroupSource,    // k per group, on a device of the group (its source)
  kHost,           // one host tensor, staged before the step
  kModuleDevices,  // one operand from every module device, in module order (all read by the one
                   // share)
};
/// Which results it writes.
enum class CollectiveWrites : uint8_t {
  kPerDevice,    // results grouped by device, k each
  kFirstDevice,  // every result on the first listed device
};

struct CollectiveInfo {
  CollectiveKind kind;
  CollectiveReads reads;
  CollectiveWrites writes;
  CollectiveCall call;
  int devices_attr;  // the `devices` attribute's index
  int groups_attr;   // the `groups` attribute's index, -1 when the op has none
};

/// The kind of collective `n` is; nullopt for any other node.
inline std::optional<CollectiveKind> collectiveKind(const Node& n) {
  if (n.info().collective == nullptr) return std::nullopt;
  return n.info().collective->kind;
}

/// A half-open range of operand or result indices.
struct IndexRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

/// A collective node as every device of its `devices` list sees it.
class CollectiveView {
 public:
  static std::optional<CollectiveView> of(const Node& n);
  static bool is(const Node& n) { return n.info().collective != nullptr; }
  explicit CollectiveView(const Node& n) : n_(&n), info_(n.info().collective) {}

  const Node& node() const { return *n_; }
  const CollectiveInfo& info() const { return *info_; }
  CollectiveKind kind() const { return info_->kind; }
  CollectiveCall call() const { return info_->call; }
  const std::vector<Device>& devices() const {
    return std::get<std::vector<Device>>(n_->attrs()[static_cast<size_t>(info_->devices_attr)]);
  }
  /// The gradient bucket it moves (`bucket` of all_reduce, reduce_scatter, all_gather);
  /// nullopt for collectives without one.
  std::optional<int64_t> bucket() const;
  /// G of `groups=G`, 1 for ops without groups.
  int64_t numGroups() const {
    return info_->groups_attr < 0
               ? 1
               : std::get<int64_t>(n_->attrs()[static_cast<size_t>(info_->groups_attr)]);
  }
  /// The groups as positions in devices(): G consecutive runs of equal length.
  std::vector<std::vector<size_t>> groups() const;
  /// The group of position `k`.
  size_t groupOf(size_t k) const;
  /// The operands the share at position `k` reads: its k operands, its group's sources
  /// (read where the share is on their device), all of them (gather) or none (host).
  IndexRange readsAt(size_t k) const;
  /// The results the share at position `k` writes.
  IndexRange writesAt(size_t k) const;
  /// The position in devices() of the device that holds result `i`.
  size_t positionOfResult(size_t i) const;

 private:
  const Node* n_;
  const CollectiveInfo* info_;
};

}  // namespace tandem::ir
