#pragma once

// Per-element math of the same-GPU communicator (logical devices sharing a GPU, which
// NCCL refuses): every element is reduced over the ranks in the CPU local communicator's
// fixed pairwise tree (backend/cpu/local_communicator.h), given as a plan of combine
// steps, in the CPU's accumulator type, so both backends give the same bits. Compiled for
// the GPU (communicator.cu) and by the host tests.

#include <cstdint>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

enum class ReduceKind : uint8_t { kSum, kMean, kMax };

/// The most logical devices one same-GPU group may have (the plan travels as a kernel
/// parameter).
constexpr int kMaxSharedRanks = 32;

/// The reduction order over `ranks` values v[0..ranks): step s sets
/// v[into[s]] = combine(v[into[s]], v[from[s]]), for s < ranks - 1; the result is v[0].
struct TreePlan {
  int ranks = 0;
  uint8_t into[kMaxSharedRanks] = {};
  uint8_t from[kMaxSharedRanks] = {};
};

/// The CPU's combine: a + b, or std::max(a, b) (which is (a < b) ? b : a, operand order
/// included, so NaNs and signed zeros come out alike).
template <typename A>
TANDEM_HD A combineValues(A a, A b, ReduceKind op) {
  return op == ReduceKind::kMax ? (a < b ? b : a) : a + b;
}

/// Elements read in their accumulator type (bf16 sums in f32, rounded once at the end,
/// as on CPU) and written back rounded.
TANDEM_HD float commLoad(const float* p, int64_t i) { return p[i]; }
TANDEM_HD float commLoad(const uint16_t* p, int64_t i) { return bf16ToFloat(p[i]); }
TANDEM_HD double commLoad(const double* p, int64_t i) { return p[i]; }
TANDEM_HD int32_t commLoad(const int32_t* p, int64_t i) { return p[i]; }
TANDEM_HD int64_t commLoad(const int64_t* p, int64_t i) { return p[i]; }
TANDEM_HD void commStore(float* p, int64_t i, float v) { p[i] = v; }
TANDEM_HD void commStore(uint16_t* p, int64_t i, float v) { p[i] = floatToBf16(v); }
TANDEM_HD void commStore(double* p, int64_t i, double v) { p[i] = v; }
TANDEM_HD void commStore(int32_t* p, int64_t i, int32_t v) { p[i] = v; }
TANDEM_HD void commStore(int64_t* p, int64_t i, int64_t v) { p[i] = v; }

/// `values` (plan.ranks of them) reduced in the plan's order; mean divides once, at the
/// end, in the accumulator type (integer division for i32, as on CPU).
template <typename A>
TANDEM_HD A reduceByPlan(const TreePlan& plan, ReduceKind op, A* values) {
  for (int s = 0; s + 1 < plan.ranks; ++s)
    values[plan.into[s]] = combineValues(values[plan.into[s]], values[plan.from[s]], op);
  A result = values[0];
  if (op == ReduceKind::kMean) result = result / static_cast<A>(plan.ranks);
  return result;
}

/// Element i of an all_reduce: read from every rank's source, reduced, written to every
/// rank's destination (all reads first, so a destination may alias a source).
template <typename T>
TANDEM_HD void allReduceElement(const TreePlan& plan, ReduceKind op, const T* const* srcs,
                                T* const* dsts, int64_t i) {
  using A = decltype(commLoad(srcs[0], 0));
  A values[kMaxSharedRanks];
  for (int r = 0; r < plan.ranks; ++r) values[r] = commLoad(srcs[r], i);
  const A result = reduceByPlan(plan, op, values);
  for (int r = 0; r < plan.ranks; ++r) commStore(dsts[r], i, result);
}

/// Element i of one rank's reduce_scatter shard: element `first + i` of every rank's
/// buffer reduced as allReduceElement reduces it (so the shard is the bits of that slice
/// of the all_reduce), written to dst[i].
template <typename T>
TANDEM_HD void reduceScatterElement(const TreePlan& plan, ReduceKind op, const T* const* srcs,
                                    int64_t first, T* dst, int64_t i) {
  using A = decltype(commLoad(srcs[0], 0));
  A values[kMaxSharedRanks];
  for (int r = 0; r < plan.ranks; ++r) values[r] = commLoad(srcs[r], first + i);
  commStore(dst, i, reduceByPlan(plan, op, values));
}

}  // namespace tandem::backend::cuda
