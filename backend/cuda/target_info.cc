// What the compiler may know about CUDA devices (ir/target.h). Plain C++, built into every
// build (backend/CMakeLists.txt): the compiler compiles for cuda devices (tandem dump
// --devices cuda:0) also where the CUDA backend is not built.

#include "backend/cuda/target_info.h"

namespace tandem::backend::cuda {

ir::TargetInfo targetInfo() {
  return ir::TargetInfo{
      .kind = *ir::DeviceKind::named("cuda"),
      .display_name = "CUDA",
      .alignment = kAlignment,
      .multi_tensor_update = true,  // sgd_update_group: one launch per 48 parameters
      .preferred_layout = ir::ActivationLayout::kChannelsLast,  // NHWC (layout_plan.h)
      .step_recording = true,                                   // CUDA graphs
      .cross_process_collectives = true,                        // NCCL over MPI
      .dtypes = {ir::DType::kF32, ir::DType::kBF16, ir::DType::kI32, ir::DType::kF64},
      .shares_devices = true,  // cuda:0.1: GPU 0's second logical device
      .missing_backend_hint = "use cpu:N devices; docs/GPU.md says what a CUDA build needs",
  };
}

}  // namespace tandem::backend::cuda
