// What the compiler may know about CUDA devices (ir/target.h). Plain C++, built into every
// build (backend/CMakeLists.txt): the compiler compiles for cuda devices (tandem dump
// --devices cuda:0) also where the CUDA backend is not built.

#include "backend/cuda/target_info.h"

#include <algorithm>

#include "ir/ir.h"

namespace tandem::backend::cuda {
namespace {

int64_t alignUp(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// `v`'s elements at 4 bytes each: what a copy of it in f32 or bf16 takes at most.
int64_t copyBytes(const ir::Value& v) { return alignUp(v.type().numElements() * 4); }

// What the kernels lay out in their workspace, from the node alone (conv_kernels.cc,
// linear_kernels.cc): an upper bound, since the exact need depends on the algorithm the
// library picks on the GPU; the kernel picks among those that fit what is planned.
//  - convolutions: cuDNN's algorithm workspace, then the filter as cuDNN reads it (bf16,
//    KRSC) or the dw it writes, then x and y in NHWC where the layout plan keeps them NCHW.
//    operand 0, operand 1 and result 0 are x, w, y (forward), dy, w, dx (backward data) or
//    dy, x, dw (backward filter): the three tensors of the call in every pass.
//  - matrix products: A and the bias converted to bf16, then cuBLASLt's workspace.
int64_t workspaceBytes(const ir::Node& n) {
  switch (n.op()) {
    case ir::Op::kConv2d:
    case ir::Op::kConv2dBiasAct:
    case ir::Op::kConv2dStats:
    case ir::Op::kConv2dBackwardData:
    case ir::Op::kConv2dBackwardFilter: {
      const int64_t tensors =
          copyBytes(*n.operand(0)) + copyBytes(*n.operand(1)) + copyBytes(*n.result(0));
      return alignUp(std::clamp(tensors, kConvAlgorithmWorkspace, kMaxConvAlgorithmWorkspace)) +
             tensors;
    }
    case ir::Op::kLinear:
    case ir::Op::kLinearBackwardData:
    case ir::Op::kLinearBackwardWeight: {
      int64_t converted = 0;
      for (const ir::Value* o : n.operands()) converted += alignUp(o->type().numElements() * 2);
      return converted + kMatmulWorkspace;
    }
    default:
      return 0;
  }
}

}  // namespace

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
      .max_workspace_bytes = kMaxWorkspace,
      .workspace_bytes = workspaceBytes,
      .missing_backend_hint = "use cpu:N devices; docs/GPU.md says what a CUDA build needs",
  };
}

}  // namespace tandem::backend::cuda
