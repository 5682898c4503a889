#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `shard-weight-update` (CLI --shard-updates; after insert-collectives): the weight update
/// sharded across the devices, as XLA's cross-replica sharding of the weight update and
/// ZeRO stage 1/2 do it. Per gradient bucket (a flat all_reduce feeding optimizer updates):
///  - each device packs the bucket's gradients into one flat buffer (reshape, concat_axis)
///    and a `reduce_scatter` replaces the all_reduce: device d gets shard d of the sums,
///    shards[d] = N / D elements, one more on the first N % D devices (uneven where the
///    bucket does not divide; never padded, so the state holds no element that is not a
///    weight's);
///  - each device packs the same range of the bucket's weights, and the optimizer's
///    flat-shard form (its spec's `sharded=`: sgd_update_shard, adamw_update_shard) steps
///    it with the bucket's state as *sharded* variables (ir::Var::shards: device d holds
///    only its shard), which replace the per-parameter state variables;
///  - an `all_gather` brings every device the whole stepped bucket, which is cut back
///    (slice_axis, reshape) and assigned to the weights.
/// Hierarchical buckets (insert-collectives{groups=G}: all_reduce within the groups, across
/// their first devices, broadcast back) are sharded within each group of P = D / G devices
/// and replicated across the groups, as FSDP's hybrid sharding: a reduce_scatter{groups=G}
/// gives rank r of each group shard r of its group's sum, an all_reduce among the devices
/// of rank r (one group of G per rank) adds the groups' shards, and the all_gather runs
/// within the groups. The state costs 1/P per device (shard_groups=G on the variables).
/// The reduce_scatter's shard is the all_reduce's slice bit for bit (the communicators'
/// one reduction order) and the flat-shard updates are the single updates' arithmetic
/// element for element, so the weights are the replicated update's bits.
class ShardWeightUpdate final : public Pass {
 public:
  static constexpr absl::string_view kName = "shard-weight-update";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes
