#pragma once

// How a grouped update's k parameters (sgd_update_group, adamw_update_group) are cut into
// multi-tensor launches of its kernel (optimizer.cu, adamw.cu), compiled for the GPU and by
// the host tests. Each launch takes
// a table of up to kGroupTensorsPerLaunch parameters by value (about 2 KiB: under the
// 4 KiB of kernel parameters every CUDA version takes, so no copy of the table to device
// memory and nothing to free, and CUDA graphs capture it as it is); block b of a launch
// steps kGroupChunk values of the parameter whose block range holds b.

#include <cstdint>
#include <vector>

#include "backend/cuda/host_device.h"

namespace tandem::backend::cuda {

inline constexpr int kGroupTensorsPerLaunch = 48;
/// Values per block: 256 threads x 16, large enough that a block's start-up is small
/// against its work, small enough that a ResNet-18's 11 M values make ~2,700 blocks.
inline constexpr int64_t kGroupChunk = 4096;
/// Blocks per launch at most (grid x allows 2^31 - 1; the prefix sums stay in int64).
inline constexpr int64_t kGroupMaxBlocks = int64_t{1} << 30;

/// One launch's parameters, passed to the kernel by value.
struct SgdGroupTable {
  int count = 0;
  float* w[kGroupTensorsPerLaunch];
  const void* g[kGroupTensorsPerLaunch];
  float* m[kGroupTensorsPerLaunch];  // null without momentum
  int64_t n[kGroupTensorsPerLaunch];
  /// Parameter j owns blocks [first_block[j], first_block[j + 1]).
  int64_t first_block[kGroupTensorsPerLaunch + 1];
};

// The table and the hyperparameters (12 bytes) are the kernel's parameters: within the
// 4 KiB that every CUDA version and architecture takes.
static_assert(sizeof(SgdGroupTable) + 16 <= 4096, "SgdGroupTable outgrows kernel parameters");

/// One launch of adamw_update_group's parameters: as SgdGroupTable, with both moments and
/// each parameter's update count (read by every block of it, counted up after the launch).
struct AdamwGroupTable {
  int count = 0;
  float* w[kGroupTensorsPerLaunch];
  const void* g[kGroupTensorsPerLaunch];
  float* m[kGroupTensorsPerLaunch];
  float* v[kGroupTensorsPerLaunch];
  float* step[kGroupTensorsPerLaunch];
  int64_t n[kGroupTensorsPerLaunch];
  int64_t first_block[kGroupTensorsPerLaunch + 1];
};

// With AdamW's hyperparameters (40 bytes) and the learning-rate factor's pointer.
static_assert(sizeof(AdamwGroupTable) + 64 <= 4096, "AdamwGroupTable outgrows kernel parameters");

/// Blocks that cover n values (at least one, so that an empty tensor costs nothing but a
/// block that returns: the prefix sums then never repeat).
TANDEM_HD int64_t groupBlocks(int64_t n) {
  return n > kGroupChunk ? (n + kGroupChunk - 1) / kGroupChunk : 1;
}

/// The parameter whose block range holds `block` (binary search over the prefix sums).
TANDEM_HD int groupTensorOf(const int64_t* first_block, int count, int64_t block) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first_block[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// The values [begin, end) of parameter `tensor` that `block` steps.
struct GroupRange {
  int64_t begin, end;
};
TANDEM_HD GroupRange groupRangeOf(const int64_t* first_block, const int64_t* n, int tensor,
                                  int64_t block) {
  const int64_t begin = (block - first_block[tensor]) * kGroupChunk;
  const int64_t end = begin + kGroupChunk;
  return {begin, end < n[tensor] ? end : n[tensor]};
}

/// One launch of a plan: parameters [first, first + count) and their prefix sums.
struct GroupLaunch {
  int first = 0, count = 0;
  int64_t first_block[kGroupTensorsPerLaunch + 1] = {};
  int64_t blocks() const { return first_block[count]; }
};

/// The launches for parameters of `sizes` values each, in order: a new launch when the
/// table is full or the grid would grow past kGroupMaxBlocks.
inline std::vector<GroupLaunch> planGroupLaunches(const std::vector<int64_t>& sizes) {
  std::vector<GroupLaunch> plan;
  for (size_t j = 0; j < sizes.size(); ++j) {
    const int64_t blocks = groupBlocks(sizes[j]);
    if (plan.empty() || plan.back().count == kGroupTensorsPerLaunch ||
        plan.back().blocks() + blocks > kGroupMaxBlocks) {
      plan.emplace_back();
      plan.back().first = static_cast<int>(j);
    }
    GroupLaunch& l = plan.back();
    l.first_block[l.count + 1] = l.first_block[l.count] + blocks;
    ++l.count;
  }
  return plan;
}

}  // namespace tandem::backend::cuda
