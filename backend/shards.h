#pragma once

// The shards of a reduceScatter or allGather (communicator.h): rank r's shard is
// sizes[r] elements of the flat buffer, starting where rank r-1's ends. What every
// communicator checks and computes alike.

#include <cstdint>
#include <numeric>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "backend/tensor_view.h"

namespace tandem::backend {

/// Where rank r's shard starts, in elements.
inline int64_t shardOffset(absl::Span<const int64_t> sizes, int r) {
  return std::accumulate(sizes.begin(), sizes.begin() + r, int64_t{0});
}

/// Whether the shards have one size (NCCL's ReduceScatter and AllGather take only that).
inline bool evenShards(absl::Span<const int64_t> sizes) {
  for (int64_t s : sizes)
    if (s != sizes[0]) return false;
  return true;
}

/// `whole` (the flat buffer) and `shard` (rank `rank`'s part) fit `sizes` over `ranks`
/// ranks: one dtype, one size per rank, each >= 1, adding up to the buffer. The IR's
/// shape rule ensures this for a verified graph, so a failure is the caller's bug: an
/// internal error naming `where` and `call`.
inline absl::Status checkShards(const TensorView& whole, const TensorView& shard,
                                absl::Span<const int64_t> sizes, int rank, int ranks,
                                const std::string& where, const char* call) {
  auto bad = [&](const std::string& what) {
    return absl::InternalError(absl::StrCat(where, ": ", call, " on rank ", rank, ": ", what));
  };
  if (static_cast<int>(sizes.size()) != ranks)
    return bad(absl::StrCat(sizes.size(), " shard sizes for ", ranks, " ranks"));
  if (rank < 0 || rank >= ranks) return bad(absl::StrCat("rank out of range [0, ", ranks, ")"));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1) return bad("a shard of no elements");
    total += s;
  }
  if (whole.type.dtype != shard.type.dtype)
    return bad(absl::StrCat(ir::toString(whole.type), " and ", ir::toString(shard.type),
                            " differ in dtype"));
  if (whole.numElements() != total)
    return bad(absl::StrCat("the buffer ", ir::toString(whole.type), " is not the ", total,
                            " elements the shards add up to"));
  if (shard.numElements() != sizes[static_cast<size_t>(rank)])
    return bad(absl::StrCat("its shard ", ir::toString(shard.type), " is not ",
                            sizes[static_cast<size_t>(rank)], " elements"));
  return absl::OkStatus();
}

}  // namespace tandem::backend
