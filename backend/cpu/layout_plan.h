#pragma once

// Which activations a CPU device keeps channel-blocked (oneDNN's nChw16c: 16 channels
// interleaved per pixel) between kernels: what the plan's assign-layouts says
// (passes/assign_layouts.h, under the CPU target's rules in target_info.cc). The kernels are
// made for it; nothing here decides.

#include "absl/container/flat_hash_set.h"
#include "backend/cpu/target_info.h"  // kChannelBlock
#include "ir/ir.h"

namespace tandem::backend::cpu {

/// The values the plan of `g` keeps in nChw16c (none without a plan or its layouts).
absl::flat_hash_set<const ir::Value*> channelBlockedValues(const ir::Graph& g);

}  // namespace tandem::backend::cpu
