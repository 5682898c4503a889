#pragma once

// One kernel-table mechanism for every backend. The op spec (ir/ops.td) says which ops
// need a kernel (every op without the `runtime` trait: the runtime executes graph inputs,
// variable reads and collectives itself); ir/kernel_ops.inc lists those slots. A backend
// declares a factory per slot (KernelOr make<Op>Kernel(const KernelInit&), next to its
// op family, declared for every slot by including ir/kernel_ops.inc) and fills its table
// from the same list, skipping what it lacks with `if constexpr`: a factory it declares
// but does not define is a link error naming it, unless the backend says it lacks that op
// (its `lacks` predicate); loading a node of an op it lacks is an error naming the node,
// its device and the backend, never a crash.
//
// No registration by static objects: a static library drops the object files nothing
// refers to, and with them their registrations.

#include <array>
#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"
#include "ir/kernel_ops.h"

namespace tandem::backend {

/// Per op, the factory that makes a backend's kernel of a node. `Init` is what the
/// backend's factories take, `KernelPtr` what they return.
template <typename Init, typename KernelPtr>
class KernelTable {
 public:
  using Factory = absl::StatusOr<KernelPtr> (*)(const Init&);

  explicit KernelTable(absl::string_view backend) : backend_(backend) {}

  void set(ir::Op op, Factory f) { slots_[static_cast<size_t>(op)] = f; }
  bool has(ir::Op op) const { return slots_[static_cast<size_t>(op)] != nullptr; }

  /// The ops that need a kernel and have none here, in spec order.
  std::vector<ir::Op> lacking() const {
    std::vector<ir::Op> out;
    for (const ir::OpInfo& info : ir::allOps())
      if (!info.has(ir::kRuntime) && !has(info.op)) out.push_back(info.op);
    return out;
  }

  /// The kernel of `node`, or an error naming the node (with its device) and the backend.
  absl::StatusOr<KernelPtr> make(const ir::Node& node, const Init& init) const {
    if (node.info().has(ir::kRuntime))
      return absl::InternalError(absl::StrCat(node.describe(), " has no ", backend_,
                                              " kernel: the runtime executes it itself"));
    Factory f = slots_[static_cast<size_t>(node.op())];
    if (f == nullptr)
      return absl::UnimplementedError(absl::StrCat(node.describe(), ": the ", backend_,
                                                   " backend has no kernel for ", node.opName()));
    return f(init);
  }

 private:
  absl::string_view backend_;
  std::array<Factory, ir::kNumOps> slots_{};
};

}  // namespace tandem::backend

// What every backend writes, once each, with KernelOr and KernelInit its own:
//   kernels.h:  TANDEM_DECLARE_KERNEL_FACTORIES()
//   kernels.cc: constexpr bool lacks(ir::Op op) { return ...; }  // what it has no kernel for
//               ... KernelTable<...> table("CPU"); TANDEM_FILL_KERNEL_TABLE(); ...
#define TANDEM_DECLARE_KERNEL_FACTORY_(Enum, name) KernelOr make##Enum##Kernel(const KernelInit&);
/// Declares `KernelOr make<Op>Kernel(const KernelInit&)` for every kernel slot.
#define TANDEM_DECLARE_KERNEL_FACTORIES() TANDEM_KERNEL_OPS(TANDEM_DECLARE_KERNEL_FACTORY_)
#define TANDEM_FILL_KERNEL_SLOT_(Enum, name)       \
  if constexpr (!lacks(::tandem::ir::Op::k##Enum)) \
    table.set(::tandem::ir::Op::k##Enum, &make##Enum##Kernel);
/// Fills `table` (a KernelTable in scope) with every factory but those of the ops the
/// constexpr predicate `lacks` in scope names (never referred to, so never defined).
#define TANDEM_FILL_KERNEL_TABLE() TANDEM_KERNEL_OPS(TANDEM_FILL_KERNEL_SLOT_)
