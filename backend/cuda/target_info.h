#pragma once

// The CUDA target's facts (target_info.cc), known in every build.

#include <cstdint>

#include "ir/target.h"

namespace tandem::backend::cuda {

/// What cudaMalloc gives and cuDNN's and the vector kernels' loads want.
inline constexpr int64_t kAlignment = 256;

/// cuDNN's algorithm workspace for one convolution: at least this, or more as the call's
/// tensors grow, up to the most: the algorithm walk takes only those that fit the plan.
inline constexpr int64_t kConvAlgorithmWorkspace = int64_t{32} << 20;
inline constexpr int64_t kMaxConvAlgorithmWorkspace = int64_t{256} << 20;
/// cuBLASLt's workspace for one matrix product (and plain cuBLAS's, the fallback).
inline constexpr int64_t kMatmulWorkspace = int64_t{32} << 20;
/// The budget of one kernel (TargetInfo::max_workspace_bytes): a convolution's copies of
/// its tensors count in it, so it is far above cuDNN's own share.
inline constexpr int64_t kMaxWorkspace = int64_t{4} << 30;

/// The ops the CUDA backend has no kernel for: fuse-conv-relu-pool's pair (its per-image
/// loops are the CPU's; on a GPU cuDNN's convolution and the pool kernels run unfused).
/// The kernel table skips them (cuda_kernel.cc) and TargetInfo::lacks_kernel says so to
/// the pipeline, from this one list.
constexpr bool lacksKernel(ir::Op op) {
  return op == ir::Op::kConv2dReluAvgPool || op == ir::Op::kConv2dReluAvgPoolBackwardFilter;
}

/// What the compiler may know about CUDA devices.
ir::TargetInfo targetInfo();

}  // namespace tandem::backend::cuda
