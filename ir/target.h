#pragma once

// What the compiler may know about a kind of device: the target-info registry. The IR
// keeps a device's kind as a name it does not interpret (ir::DeviceKind); each backend
// registers its kind's facts here when it registers (backend/registry.cc), and passes,
// the pipeline and the CLI ask them instead of naming kinds: which devices are valid,
// the alignment arenas keep, whether an optimizer's grouped form runs as one launch, the
// activation layout the kernels prefer and the slots that take it (assign-layouts), the
// algorithms a kernel may run (choose-algorithms).
// Facts only: nothing here runs on a device, so the CUDA target is known (tandem dump
// --devices cuda:0) in a build without the CUDA backend.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/op_enum.h"
#include "ir/types.h"

namespace tandem::ir {

class Node;
class Value;

/// How a target's kernels like activations laid out between them (the backend's layout
/// plan keeps them so where every kernel that touches them can).
enum class ActivationLayout : uint8_t {
  kPlain,           // NCHW as the IR describes it
  kChannelBlocked,  // oneDNN's nChw16c (CPU, AVX-512)
  kChannelsLast,    // NHWC (CUDA tensor cores)
};

/// How a layout is spelled in the plan's text (`layout=[nChw16c]`): nchw, nChw16c, nhwc.
absl::string_view layoutName(ActivationLayout l);
/// The layout spelled `name`, or nullopt.
std::optional<ActivationLayout> layoutNamed(absl::string_view name);

/// Which values a target's kernels take in its preferred layout, as data for
/// assign-layouts (passes/assign_layouts.h), which plans them, and the plan verifier, which
/// checks a plan against them.
struct LayoutRules {
  /// Whether value `v` may be kept in the preferred layout at all (dtype, channels); a
  /// value that is not 4-D never is, whatever this says.
  std::function<bool(const Value& v)> eligible;
  /// Which layout the kernel of `n` takes in operand (result == false) or result slot
  /// `index`: nullopt, plain only; else a link: the 4-D values in slots of one node with
  /// the same link share a layout, and a slot whose link no other slot has takes either
  /// layout on its own. (Non-4-D values in a linked slot are plain and join nothing.)
  std::function<std::optional<int>(const Node& n, bool result, size_t index)> slot;
};

/// Which of their ways a target's kernels run, as data for choose-algorithms
/// (passes/choose_algorithms.h), which records one per node in the plan (`algo=gemm`), and
/// the plan verifier, which checks a plan's against them. The words are the target's: the
/// IR does not interpret them. A node without one leaves the choice to its kernel.
struct AlgorithmRules {
  /// The layout planned for a value (plain in a plan without layouts).
  using LayoutOf = std::function<ActivationLayout(const Value& v)>;
  /// The algorithms the kernel of `n` can run with the layouts planned around it; empty:
  /// its kernel has no choice to plan.
  std::function<std::vector<std::string>(const Node& n, const LayoutOf& layout)> offered;
  /// The one of them measured fastest for `n`; `exact`: only those whose rounding is that
  /// of the direct computation (no Winograd; `--conv-algorithm direct`).
  std::function<std::string(const Node& n, const LayoutOf& layout, bool exact)> choose;
};

/// The facts of one device kind.
struct TargetInfo {
  DeviceKind kind;
  /// How messages name it ("CPU", "CUDA").
  std::string display_name;
  /// Bytes every buffer of a memory plan is aligned to: what its kernels' vector loads,
  /// oneDNN or cuDNN want (plan-memory{alignment} takes the largest of a module's kinds).
  int64_t alignment = 64;
  /// Runs an optimizer's grouped form (sgd_update_group, adamw_update_group) as one multi-tensor launch, so
  /// the default pipeline groups updates (group-updates) for its devices.
  bool multi_tensor_update = false;
  ActivationLayout preferred_layout = ActivationLayout::kPlain;
  /// Which slots of its kernels take preferred_layout (unused when that is kPlain).
  LayoutRules layout_rules;
  /// Which kernels have algorithms to plan (null members: none).
  AlgorithmRules algorithm_rules;
  /// Records a whole step once and replays it with one launch (CUDA graphs).
  bool step_recording = false;
  /// Has communicators between devices of different processes (mpirun).
  bool cross_process_collectives = false;
  /// The dtypes its kernels compute in.
  std::vector<DType> dtypes;
  /// Several logical devices may share one physical device (cuda:0.1 is GPU 0's second);
  /// a device given twice in a device list is then the next share.
  bool shares_devices = false;
  /// Why not, when it cannot (what `--devices cpu:0.1` is refused with).
  std::string no_shares_reason;
  /// The most scratch bytes one kernel may be planned (plan-memory's budget per node): a
  /// kernel that could use more (cuDNN's faster algorithms) picks among those that fit.
  int64_t max_workspace_bytes = 0;
  /// The scratch bytes the kernel of `n` (a node on a device of this kind) needs besides its
  /// operands and results, from the node alone: its op, attributes and types. Asked by
  /// plan-memory and the plan verifier; nothing is made or run to answer. Null, or 0 for a
  /// node: none. A capability rather than a number, since it differs per op and shape.
  std::function<int64_t(const Node& n)> workspace_bytes;
  /// What to do when a build has no backend for the kind (loading a module on it says so).
  std::string missing_backend_hint;
  /// The ops its backend has no kernel for (null: none), so that the default pipeline
  /// writes none of them for its devices (fuse-conv-relu-pool's fused pair on CUDA).
  std::function<bool(Op op)> lacks_kernel;
};

/// Adds `info`, or replaces the facts of its kind (tests stand in their own).
void registerTarget(TargetInfo info);
/// The facts of `kind`, or null when no backend registered it.
const TargetInfo* findTarget(DeviceKind kind);
/// Every registered kind, in registration order.
std::vector<const TargetInfo*> registeredTargets();

/// OK when `d` is a device a registered kind has: its kind is known and, with a share
/// (cuda:0.1), the kind shares devices. The errors read "unknown device 'tpu:0': the device
/// kind must be cpu or cuda".
absl::Status checkTargetDevice(const Device& d);
/// A device list ("cpu:0,cpu:1", "cuda:0,cuda:0", or a count "4") checked against the
/// registered kinds: parseDeviceList with the next share for a device given again of a
/// kind that shares devices, then checkTargetDevice on each.
absl::StatusOr<std::vector<Device>> parseTargetDevices(absl::string_view text);

/// The facts of `t` in a line for `tandem devices`: "arenas aligned to 64 B; activations
/// nChw16c between kernels that take it; computes in f32, bf16, ...".
std::string describeTarget(const TargetInfo& t);

/// The workspace `n`'s target declares for it (0 when none, or its kind is not registered
/// or declares none); an error names the node when the need passes the target's budget.
/// `t` is the target of n's device (findTarget), looked up once per device by callers
/// that ask for many nodes.
absl::StatusOr<int64_t> declaredWorkspace(const TargetInfo* t, const Node& n);

/// The largest alignment the kinds of `devices` want; an error names a device of a kind
/// no backend registered.
absl::StatusOr<int64_t> targetAlignment(const std::vector<Device>& devices);

}  // namespace tandem::ir
