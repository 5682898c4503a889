#pragma once

// Own kernels of the same-GPU communicator (communicator.cu), enqueued on `stream`;
// callers check cudaGetLastError.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/communicator_math.h"

namespace tandem::backend::cuda {

enum class ElementKind : uint8_t { kF32, kBF16, kF64, kI32, kI64 };

/// For every i < n: allReduceElement over the plan's ranks, reading srcs[r][i] and writing
/// dsts[r][i] (r < plan.ranks; elements of `kind`; device pointers the stream's GPU can
/// reach).
void launchSharedAllReduce(const TreePlan& plan, ReduceKind op, ElementKind kind,
                           const void* const* srcs, void* const* dsts, int64_t n,
                           cudaStream_t stream);

/// For every i < n: reduceScatterElement, reading srcs[r][first + i] for every rank r < plan.ranks
/// and writing dst[i] (one rank's shard).
void launchSharedReduceScatter(const TreePlan& plan, ReduceKind op, ElementKind kind,
                               const void* const* srcs, int64_t first, void* dst, int64_t n,
                               cudaStream_t stream);

}  // namespace tandem::backend::cuda
