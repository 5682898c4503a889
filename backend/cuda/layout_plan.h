#pragma once

// Which activations a CUDA device keeps in NHWC (channels last) between kernels instead of
// the IR's NCHW: the plan of backend/activation_layout.h under the rules of the CUDA
// kernels, made once per graph in CudaDevice::prepareGraph (--plain-layout: none).
//
// cuDNN's convolutions are fastest in NHWC: its tensor-core kernels (TF32 for f32, bf16
// under mixed precision) are implicit GEMMs over channels-last data, and given NCHW they
// transpose in and out inside every call. Batch norm, add, relu and pooling are own
// kernels that take either layout, so between convolutions the tensors stay NHWC and the
// transposes disappear. Collectives, the host, variables and every kernel not listed in
// nhwcRules see NCHW, as the IR describes it.

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "backend/activation_layout.h"
#include "ir/ir.h"

namespace tandem::backend::cuda {

/// What the CUDA kernels take: f32 or bf16 [N,C,H,W] with C * element size a multiple of
/// 16 bytes (f32: C % 4, bf16: C % 8) may be NHWC; slots: the convolutions' activations
/// (each on its own; conv2d_bias_act's residual with its output), the batch-norm family,
/// add, relu, relu_backward and cast (all 4-D tensors of a node in one layout), max and
/// average pooling and their backward (one layout per node), global_avg_pool's input and
/// its backward's x and dx.
const LayoutRules& nhwcRules();

/// The values of `g` to keep in NHWC.
absl::flat_hash_set<const ir::Value*> nhwcValues(const ir::Graph& g);

/// OK when the kernel of `node` takes every operand and result in the layout `nhwc`
/// gives it (values in the set NHWC, others NCHW); else an internal error naming the node
/// and the slot. Kernels are made only after this check.
absl::Status checkNhwcSlots(const ir::Node& node,
                            const absl::flat_hash_set<const ir::Value*>& nhwc);

}  // namespace tandem::backend::cuda
