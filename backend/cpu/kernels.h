#pragma once

// The CPU kernel table: one factory per op of ir/ops.def, defined next to its family in
// backend/cpu/*_kernels.cc (a missing factory is a link error, as a missing shape rule is).

#include <memory>

#include "absl/status/statusor.h"
#include "backend/cpu/cpu_context.h"
#include "backend/kernel.h"
#include "ir/ir.h"

namespace tandem::backend::cpu {

/// What a factory gets: the node (operand/result types, attributes, the module's
/// variables for `initialize`) and its device's context.
struct KernelInit {
  const ir::Node& node;
  CpuContext& ctx;
};

using KernelOr = absl::StatusOr<std::unique_ptr<Kernel>>;

#define OP(Enum, name, operands, attrs, traits, doc) KernelOr make##Enum##Kernel(const KernelInit&);
#include "ir/ops.def"
#undef OP

/// Creates the CPU kernel of a node. Graph inputs, `param` (an alias of variable storage)
/// and collectives (run by a Communicator on the comm stream) have no kernel: asking for
/// one is an internal error.
KernelOr makeKernel(const ir::Node& node, CpuContext& ctx);

/// The error a factory returns for ops that the runtime handles itself.
absl::Status notAKernel(const ir::Node& node);

}  // namespace tandem::backend::cpu
