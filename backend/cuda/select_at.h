#pragma once

// Element i of compare, where, mod and mod_backward as the CUDA kernel (select.cu) computes
// it, compiled by the host tests too, which check it against the CPU kernels bit for bit:
// each operand (f32 or bf16 bits) read through its broadcast map, backend/select_math.h's
// function, the result rounded once where it is stored.

#include <cstdint>

#include "backend/broadcast_index.h"
#include "backend/cuda/host_device.h"
#include "backend/select_math.h"

namespace tandem::backend::cuda {

/// Which of select_math.h's functions an element is.
enum class SelectKind : int32_t { kBinary, kWhere, kModBackward };

/// The operands of one node (two or three), passed to the kernel by value.
struct SelectOperands {
  const void* data[3] = {};
  bool bf16[3] = {};
  BroadcastMap map[3];
  int32_t count = 0;
  SelectKind kind = SelectKind::kBinary;
  BinaryFn fn = BinaryFn::kEq;  // kBinary's function
  bool fmod = false;            // kModBackward's rounding
};

TANDEM_HD float selectOperand(const SelectOperands& ops, int k, int64_t i) {
  const int64_t j = ops.map[k].source(i);
  return ops.bf16[k] ? bf16ToFloat(static_cast<const uint16_t*>(ops.data[k])[j])
                     : static_cast<const float*>(ops.data[k])[j];
}

/// The value of result element i, in float.
TANDEM_HD float selectAt(const SelectOperands& ops, int64_t i) {
  const float a = selectOperand(ops, 0, i), b = selectOperand(ops, 1, i);
  switch (ops.kind) {
    case SelectKind::kBinary:
      return binaryValue(ops.fn, a, b);
    case SelectKind::kWhere:
      return whereValue(a, b, selectOperand(ops, 2, i));
    case SelectKind::kModBackward:
      break;
  }
  return modBackwardValue(a, b, selectOperand(ops, 2, i), ops.fmod);
}

}  // namespace tandem::backend::cuda
