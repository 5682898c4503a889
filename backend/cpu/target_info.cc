// What the compiler may know about CPU devices (ir/target.h), registered with the CPU
// backend (backend/registry.cc).

#include "backend/cpu/target_info.h"

namespace tandem::backend::cpu {

ir::TargetInfo targetInfo() {
  return ir::TargetInfo{
      .kind = *ir::DeviceKind::named("cpu"),
      .display_name = "CPU",
      .alignment = kAlignment,
      .multi_tensor_update = false,  // a launch costs microseconds: nothing to save
      .preferred_layout = ir::ActivationLayout::kChannelBlocked,  // nChw16c, on AVX-512
      .step_recording = false,
      .cross_process_collectives = true,  // process_communicator.h, over MPI
      .dtypes = {ir::DType::kF32, ir::DType::kBF16, ir::DType::kI32, ir::DType::kF64},
      .shares_devices = false,
      .no_shares_reason =
          "only CUDA devices share a GPU (cuda:0.1); CPU devices are separate "
          "already (cpu:0, cpu:1)",
  };
}

}  // namespace tandem::backend::cpu
