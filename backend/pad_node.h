#pragma once

// What both backends' pad kernels read from a pad or pad_backward node: its geometry
// (backend/pad_math.h) from x's shape, `pads` and `mode` (the shape rule, ir/ops/pad_ops.cc,
// has checked them), and the constant.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/pad_math.h"
#include "ir/op_views.h"

namespace tandem::backend {

static_assert(int(ir::PadMode::kConstant) == int(PadModeCode::kConstant) &&
              int(ir::PadMode::kReflect) == int(PadModeCode::kReflect) &&
              int(ir::PadMode::kEdge) == int(PadModeCode::kEdge));

/// x is operand 0 of pad, operand 1 of pad_backward (dy, x).
inline PadGeometry padGeometryOf(const ir::Node& n) {
  const bool backward = n.op() == ir::Op::kPadBackward;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  const std::vector<int64_t>& pads = ir::attr::pads(n);
  PadGeometry g;
  g.rank = static_cast<int32_t>(x.shape.size());
  g.mode = static_cast<PadModeCode>(static_cast<int32_t>(ir::attr::mode(n)));
  for (int32_t a = 0; a < g.rank; ++a) {
    g.in[a] = x.shape[size_t(a)];
    g.begin[a] = pads[size_t(a)];
    g.out[a] = g.in[a] + pads[size_t(a)] + pads[size_t(a + g.rank)];
  }
  return g;
}

}  // namespace tandem::backend
