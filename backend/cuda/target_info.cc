// What the compiler may know about CUDA devices (ir/target.h). Plain C++, built into every
// build (backend/CMakeLists.txt): the compiler compiles for cuda devices (tandem dump
// --devices cuda:0) also where the CUDA backend is not built.

#include "backend/cuda/target_info.h"

#include <algorithm>
#include <optional>

#include "ir/ir.h"
#include "ir/op_views.h"

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
//  - attention's backward: D_i = dO_i . O_i per (batch row, head, query), f32[N, H, Tq]
//    (the lse's shape), which every key row's thread reads.
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
    case ir::Op::kAttentionBackward:
      return alignUp(ir::AttentionBackwardView(n).lse()->type().numElements() * 4);
    case ir::Op::kAttentionCached: {  // each row's log-sum-exp, [N, H]
      const ir::AttentionCachedView v(n);
      return alignUp(v.q()->type().shape[0] * v.heads() * 4);
    }
    default:
      return 0;
  }
}

// The layout rules of assign-layouts (ir/target.h's LayoutRules) for NHWC. cuDNN's
// convolutions are fastest in NHWC: its tensor-core kernels (TF32 for f32, bf16 under mixed
// precision) are implicit GEMMs over channels-last data, and given NCHW they transpose in
// and out inside every call. Batch norm, add, relu and pooling are own kernels that take
// either layout, so between convolutions the tensors stay NHWC.

using ir::Op;

/// Links of the convolution family's slots (ir/target.h, LayoutRules): x-shaped tensors
/// (x, dx) are link 0, y-shaped ones (y, dy, conv2d_bias_act's residual) link 1,
/// conv2d_backward_data's x (read for its shape only) link 2. The kernel runs cuDNN in
/// NHWC when either side is NHWC and transposes the other side through its workspace,
/// so the two sides are independent (the stem convolution reads the NCHW image).
std::optional<int> convSlot(Op op, bool result, size_t i) {
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
      if (result) return i == 0 ? std::optional<int>(1) : std::nullopt;  // y; stats
      return i == 0 ? std::optional<int>(0) : std::nullopt;              // x; w, b
    case Op::kConv2dBiasAct:
      if (result) return 1;                                  // y
      if (i == 0) return 0;                                  // x
      return i == 3 ? std::optional<int>(1) : std::nullopt;  // residual; w, b
    case Op::kConv2dBackwardData:
      if (result) return 0;                                  // dx
      if (i == 0) return 1;                                  // dy
      return i == 2 ? std::optional<int>(2) : std::nullopt;  // x; w
    case Op::kConv2dBackwardFilter:
      if (result) return std::nullopt;                                    // dw, db
      return i <= 1 ? std::optional<int>(i == 0 ? 1 : 0) : std::nullopt;  // dy, x; w
    default:
      return std::nullopt;
  }
}

std::optional<int> slot(const ir::Node& n, bool result, size_t i) {
  const Op op = n.op();
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
    case Op::kConv2dBiasAct:
    case Op::kConv2dBackwardData:
    case Op::kConv2dBackwardFilter:
      return convSlot(op, result, i);
    // One layout for every 4-D tensor of the node: per-channel kernels see NHWC as
    // [N*H*W, C, 1] (norm_launch.h), elementwise ones do not care, pooling walks its planes
    // with a pixel step (pool_math.h).
    case Op::kBatchNorm:
    case Op::kBatchNormBackward:
    case Op::kBatchNormApply:
    case Op::kBatchNormRecompute:
    case Op::kBatchNormBackwardReduce:
    case Op::kBatchNormBackwardApply:
    case Op::kAdd:
    case Op::kRelu:
    case Op::kReluBackward:
    case Op::kCast:
    case Op::kMaxPool2d:
    case Op::kAvgPool2d:
    case Op::kMaxPool2dBackward:
    case Op::kAvgPool2dBackward:
      return 0;
    // global_avg_pool's [N,C,1,1] output is the same bytes in both layouts: plain.
    case Op::kGlobalAvgPool:
      return result ? std::nullopt : std::optional<int>(0);
    case Op::kGlobalAvgPoolBackward:  // dy (plain), x -> dx
      return result || i == 1 ? std::optional<int>(0) : std::nullopt;
    default:
      return std::nullopt;
  }
}

bool eligible(const ir::Value& v) {
  // NHWC pays where a pixel's channels are whole 16-byte vectors: cuDNN's channels-last
  // tensor-core kernels load 128 bits at a time (bf16: C % 8 == 0, the multiple of 8 its
  // documentation asks for; f32 under TF32: C % 4 == 0); narrower tensors (the RGB image,
  // LeNet's 6 channels) would be padded by cuDNN inside every call.
  const ir::TensorType& t = v.type();
  if (t.dtype != ir::DType::kF32 && t.dtype != ir::DType::kBF16) return false;
  return t.shape[1] * ir::dtypeBytes(t.dtype) % 16 == 0;
}

}  // namespace

ir::TargetInfo targetInfo() {
  return ir::TargetInfo{
      .kind = *ir::DeviceKind::named("cuda"),
      .display_name = "CUDA",
      .alignment = kAlignment,
      .multi_tensor_update = true,  // sgd_update_group: one launch per 48 parameters
      .preferred_layout = ir::ActivationLayout::kChannelsLast,  // NHWC
      .layout_rules = {.eligible = eligible, .slot = slot},
      .step_recording = true,             // CUDA graphs
      .cross_process_collectives = true,  // NCCL over MPI
      .dtypes = {ir::DType::kF32, ir::DType::kBF16, ir::DType::kI32, ir::DType::kF64,
                 ir::DType::kI64},
      .shares_devices = true,  // cuda:0.1: GPU 0's second logical device
      .max_workspace_bytes = kMaxWorkspace,
      .workspace_bytes = workspaceBytes,
      .missing_backend_hint = "use cpu:N devices; docs/GPU.md says what a CUDA build needs",
      .lacks_kernel = lacksKernel,
  };
}

}  // namespace tandem::backend::cuda
