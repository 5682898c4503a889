#include "backend/cpu/layout_plan.h"

#include "backend/activation_layout.h"

namespace tandem::backend::cpu {
namespace {

using ir::Op;

/// The operand slots of a convolution-family node that hold activations (either layout);
/// its other operands and results are filters, biases and statistics (plain).
bool convActivationOperand(Op op, size_t i) {
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
      return i == 0;  // x (w, b are filters)
    case Op::kConv2dBackwardData:
      return i == 0 || i == 2;  // dy, x (x gives only the shape)
    case Op::kConv2dBackwardFilter:
      return i == 0 || i == 1;  // dy, x
    default:
      return false;
  }
}
bool convActivationResult(Op op, size_t i) {
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
    case Op::kConv2dBackwardData:
      return i == 0;  // y, dx (conv2d_stats' statistics are f64)
    default:
      return false;  // conv2d_backward_filter: dw, db
  }
}

/// Ops whose 4-D operands and results all share one layout and whose loops take both.
bool sameLayoutFamily(Op op) {
  switch (op) {
    case Op::kBatchNormApply:
    case Op::kBatchNormRecompute:
    case Op::kBatchNormBackwardReduce:
    case Op::kBatchNormBackwardApply:
    case Op::kAdd:
      return true;
    default:
      return false;
  }
}

LayoutRules cpuRules() {
  return {
      .eligible =
          [](const ir::Value& v) {
            const ir::TensorType& t = v.type();
            return (t.dtype == ir::DType::kF32 || t.dtype == ir::DType::kBF16) &&
                   t.shape[1] % kChannelBlock == 0;
          },
      .slot = [](Op op, bool result, size_t i) -> std::optional<int> {
        // One layout for every 4-D tensor of a fused batch-norm node or add (per-channel
        // vectors and f64 statistics are not 4-D and stay plain).
        if (sameLayoutFamily(op)) return 0;
        // A convolution takes either layout in each activation slot on its own (oneDNN
        // reorders inside where they differ); every other slot wants plain tensors.
        const bool activation = result ? convActivationResult(op, i) : convActivationOperand(op, i);
        if (!activation) return std::nullopt;
        return static_cast<int>(result ? 100 + i : i);
      },
  };
}

}  // namespace

absl::flat_hash_set<const ir::Value*> channelBlockedValues(const ir::Graph& g) {
  return alternativeLayoutValues(g, cpuRules());
}

}  // namespace tandem::backend::cpu
