#pragma once

// Which activations a CPU device keeps channel-blocked (oneDNN's nChw16c: 16 channels
// interleaved per pixel) between kernels instead of plain NCHW.
//
// oneDNN's fast convolutions (direct and Winograd, AVX-512) work on nChw16c. With plain
// tensors between kernels every convolution pass reorders its activations in and out:
// 6.7 % of ResNet-18's oneDNN time on CPU (docs/PERF.md). The fused batch-norm kernels
// have loops for both layouts, so between fused layers the tensors can stay blocked and
// the reorders disappear. The layout is the backend's choice, not the IR's: the IR stays
// device-neutral (a GPU backend would pick NHWC for its tensor cores), and every value a
// collective, the host or a variable sees stays plain. The union-find over the graph is
// backend/activation_layout.h, shared with the CUDA backend's NHWC plan; this file says
// what the CPU kernels take.

#include <cstdint>

#include "absl/container/flat_hash_set.h"
#include "ir/ir.h"

namespace tandem::backend::cpu {

/// Channels per block of the blocked layout (AVX-512's 16 floats).
inline constexpr int64_t kChannelBlock = 16;

/// The values of `g` to keep in nChw16c. Values that must share a layout (the 4-D
/// tensors of one fused batch-norm node, the operands and result of add) form groups; a
/// group is blocked when every member is an f32 or bf16 [N,C,H,W] tensor with C a multiple of 16,
/// made and read only by kernels that take either layout (the convolutions' activation
/// slots, the fused batch-norm family, add) and is neither a graph input, a graph output
/// nor variable storage. Everything else stays plain.
absl::flat_hash_set<const ir::Value*> channelBlockedValues(const ir::Graph& g);

}  // namespace tandem::backend::cpu
