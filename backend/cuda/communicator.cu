// The same-GPU communicator's reduction kernel: one thread per element reads every rank's
// value and reduces them in the plan's order (communicator_math.h).

#include <algorithm>

#include "backend/cuda/grid.h"
#include "backend/cuda/communicator_launch.h"
#include "backend/cuda/communicator_math.h"

namespace tandem::backend::cuda {
namespace {

constexpr int kThreads = 256;

// The ranks' pointers travel by value in the kernel's parameters (under 1 KiB).
template <typename T>
struct SharedReduceArgs {
  TreePlan plan;
  ReduceKind op;
  const T* srcs[kMaxSharedRanks];
  T* dsts[kMaxSharedRanks];
};

template <typename T>
__global__ void sharedAllReduceKernel(const SharedReduceArgs<T> args, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    allReduceElement<T>(args.plan, args.op, args.srcs, args.dsts, i);
}

template <typename T>
void launchTyped(const TreePlan& plan, ReduceKind op, const void* const* srcs, void* const* dsts,
                 int64_t n, cudaStream_t stream) {
  SharedReduceArgs<T> args{};
  args.plan = plan;
  args.op = op;
  for (int r = 0; r < plan.ranks; ++r) {
    args.srcs[r] = static_cast<const T*>(srcs[r]);
    args.dsts[r] = static_cast<T*>(dsts[r]);
  }
  const unsigned blocks = gridBlocks(n, kThreads);
  sharedAllReduceKernel<T><<<blocks, kThreads, 0, stream>>>(args, n);
}

template <typename T>
__global__ void sharedReduceScatterKernel(const SharedReduceArgs<T> args, int64_t first,
                                          int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    reduceScatterElement<T>(args.plan, args.op, args.srcs, first, args.dsts[0], i);
}

// One rank's shard: the sources of every rank, one destination (dsts[0]).
template <typename T>
void launchShardTyped(const TreePlan& plan, ReduceKind op, const void* const* srcs, int64_t first,
                      void* dst, int64_t n, cudaStream_t stream) {
  SharedReduceArgs<T> args{};
  args.plan = plan;
  args.op = op;
  for (int r = 0; r < plan.ranks; ++r) args.srcs[r] = static_cast<const T*>(srcs[r]);
  args.dsts[0] = static_cast<T*>(dst);
  const unsigned blocks = gridBlocks(n, kThreads);
  sharedReduceScatterKernel<T><<<blocks, kThreads, 0, stream>>>(args, first, n);
}

}  // namespace

void launchSharedReduceScatter(const TreePlan& plan, ReduceKind op, ElementKind kind,
                               const void* const* srcs, int64_t first, void* dst, int64_t n,
                               cudaStream_t stream) {
  if (n <= 0) return;
  switch (kind) {
    case ElementKind::kF32:
      return launchShardTyped<float>(plan, op, srcs, first, dst, n, stream);
    case ElementKind::kBF16:
      return launchShardTyped<uint16_t>(plan, op, srcs, first, dst, n, stream);
    case ElementKind::kF64:
      return launchShardTyped<double>(plan, op, srcs, first, dst, n, stream);
    case ElementKind::kI32:
      return launchShardTyped<int32_t>(plan, op, srcs, first, dst, n, stream);
    case ElementKind::kI64:
      return launchShardTyped<int64_t>(plan, op, srcs, first, dst, n, stream);
  }
}

void launchSharedAllReduce(const TreePlan& plan, ReduceKind op, ElementKind kind,
                           const void* const* srcs, void* const* dsts, int64_t n,
                           cudaStream_t stream) {
  if (n <= 0) return;
  switch (kind) {
    case ElementKind::kF32:
      return launchTyped<float>(plan, op, srcs, dsts, n, stream);
    case ElementKind::kBF16:
      return launchTyped<uint16_t>(plan, op, srcs, dsts, n, stream);
    case ElementKind::kF64:
      return launchTyped<double>(plan, op, srcs, dsts, n, stream);
    case ElementKind::kI32:
      return launchTyped<int32_t>(plan, op, srcs, dsts, n, stream);
    case ElementKind::kI64:
      return launchTyped<int64_t>(plan, op, srcs, dsts, n, stream);
  }
}

}  // namespace tandem::backend::cuda
