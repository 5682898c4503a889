// What the compiler may know about CPU devices (ir/target.h), registered with the CPU
// backend (backend/registry.cc).

#include "backend/cpu/target_info.h"

#include "backend/cpu/conv_choice.h"
#include "ir/ir.h"

namespace tandem::backend::cpu {
namespace {

using ir::Op;

// The layout rules of assign-layouts (ir/target.h's LayoutRules) for oneDNN's nChw16c.
// oneDNN's fast convolutions (direct and Winograd, AVX-512) work on nChw16c; with plain
// tensors between kernels every convolution pass reorders its activations in and out (6.7 %
// of ResNet-18's oneDNN time, docs/PERF.md). The fused batch-norm kernels and add have loops
// for both layouts, so between fused layers the tensors stay blocked.

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

std::optional<int> slot(const ir::Node& n, bool result, size_t i) {
  // One layout for every 4-D tensor of a fused batch-norm node or add (per-channel
  // vectors and f64 statistics are not 4-D and stay plain).
  if (sameLayoutFamily(n.op())) return 0;
  // A convolution takes either layout in each activation slot on its own (oneDNN
  // reorders inside where they differ); every other slot wants plain tensors.
  const bool activation =
      result ? convActivationResult(n.op(), i) : convActivationOperand(n.op(), i);
  if (!activation) return std::nullopt;
  return static_cast<int>(result ? 100 + i : i);
}

bool eligible(const ir::Value& v) {
  const ir::TensorType& t = v.type();
  return (t.dtype == ir::DType::kF32 || t.dtype == ir::DType::kBF16) &&
         t.shape[1] % kChannelBlock == 0;
}

}  // namespace

bool hostHasAvx512Core() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

ir::TargetInfo targetInfo() {
  return ir::TargetInfo{
      .kind = *ir::DeviceKind::named("cpu"),
      .display_name = "CPU",
      .alignment = kAlignment,
      .multi_tensor_update = false,  // a launch costs microseconds: nothing to save
      .preferred_layout = ir::ActivationLayout::kChannelBlocked,  // nChw16c (targets.cc)
      .layout_rules = {.eligible = eligible, .slot = slot},
      .algorithm_rules = convAlgorithmRules(hostHasAvx512Core()),
      .step_recording = false,
      .cross_process_collectives = true,  // process_communicator.h, over MPI
      .dtypes = {ir::DType::kF32, ir::DType::kBF16, ir::DType::kI32, ir::DType::kF64,
                 ir::DType::kI64},
      .shares_devices = false,
      .no_shares_reason =
          "only CUDA devices share a GPU (cuda:0.1); CPU devices are separate "
          "already (cpu:0, cpu:1)",
  };
}

}  // namespace tandem::backend::cpu
