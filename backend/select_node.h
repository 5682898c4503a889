#pragma once

// What both backends' compare and mod kernels read from the node: its BinaryFn
// (backend/select_math.h).

#include <cstdint>

#include "backend/select_math.h"
#include "ir/op_views.h"

namespace tandem::backend {

static_assert(int(ir::Comparison::kEq) == int(BinaryFn::kEq) &&
              int(ir::Comparison::kNe) == int(BinaryFn::kNe) &&
              int(ir::Comparison::kLt) == int(BinaryFn::kLt) &&
              int(ir::Comparison::kLe) == int(BinaryFn::kLe) &&
              int(ir::Comparison::kGt) == int(BinaryFn::kGt) &&
              int(ir::Comparison::kGe) == int(BinaryFn::kGe));

/// The function of a compare node (its kind) or a mod node (remainder or fmod).
inline BinaryFn binaryFnOf(const ir::Node& n) {
  if (n.op() == ir::Op::kMod) return ir::attr::fmod(n) ? BinaryFn::kFmod : BinaryFn::kRemainder;
  return static_cast<BinaryFn>(static_cast<int32_t>(ir::attr::kind(n)));
}

}  // namespace tandem::backend
