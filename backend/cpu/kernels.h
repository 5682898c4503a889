#pragma once

// The CPU kernel table (backend/kernel_table.h): one factory per kernel slot of the op
// spec, defined next to its family in backend/cpu/*_kernels.cc (a missing factory is a
// link error, as a missing shape rule is).

#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/cpu/cpu_context.h"
#include "backend/kernel.h"
#include "backend/kernel_table.h"
#include "ir/ir.h"

namespace tandem::backend::cpu {

/// Elements from which an elementwise loop is worth the device's other threads (one
/// thread's pass over 64 KiB of f32 takes microseconds, a parallel region's start about as
/// long): the `if` of such loops' `#pragma omp parallel for`.
inline constexpr int64_t kParallelElements = int64_t{1} << 14;

/// A CPU kernel: launching it enqueues its work on the CPU stream's worker thread, where
/// compute() runs. Every CPU factory returns one, so the kernel table can name its node.
class CpuKernel : public Kernel {
 public:
  absl::Status launch(Stream& stream, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out) final;

  /// Runs the work now on the calling thread (tests and benchmarks time kernels alone).
  absl::Status runHere(absl::Span<const TensorView> in, absl::Span<const TensorView> out);

  /// "%conv1.0 (conv2d @cpu:0)": prefixes errors of the work.
  void setDescription(std::string what) { what_ = std::move(what); }

 protected:
  /// The node's work over its operands and results (host memory).
  virtual void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) = 0;

 private:
  std::string what_;
};

/// What a factory gets: the node (operand/result types, attributes, the module's
/// variables for `initialize`) and its device's context.
struct KernelInit {
  const ir::Node& node;
  CpuContext& ctx;
  /// The values kept channel-blocked between kernels (layout_plan.h); null: all plain.
  const absl::flat_hash_set<const ir::Value*>* blocked = nullptr;
  bool isBlocked(const ir::Value* v) const { return blocked != nullptr && blocked->contains(v); }
  /// The algorithm the plan chose for the node (choose-algorithms, `algo=`); empty: the
  /// kernel's own rule decides (no plan, or a plan without algorithms).
  absl::string_view algorithm;
};

using KernelOr = absl::StatusOr<std::unique_ptr<CpuKernel>>;

/// The kernel of every op whose result is its operand's bytes (reshape, flatten and its
/// gradient, a transpose that moves nothing): one copy, none when the plan aliases them.
std::unique_ptr<CpuKernel> makeByteCopyKernel();

TANDEM_DECLARE_KERNEL_FACTORIES()

/// The CPU backend's kernel table.
const KernelTable<KernelInit, std::unique_ptr<CpuKernel>>& kernelTable();

/// Creates the CPU kernel of a node. Ops the runtime executes itself (graph inputs,
/// `param`, collectives: the `runtime` trait) have no kernel: asking for one is an
/// internal error.
KernelOr makeKernel(const ir::Node& node, CpuContext& ctx,
                    const absl::flat_hash_set<const ir::Value*>* blocked = nullptr);

}  // namespace tandem::backend::cpu
