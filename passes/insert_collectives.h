#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `insert-collectives{bucket-mb=25,first-bucket-mb=1,groups=1}` on a replicated module:
///  - step graphs: one host input per batch input, `split` into the per-device slices;
///  - init: random initial values are computed on the first device and `broadcast`;
///  - train_step: gradients are all-reduced in buckets filled in the order backward
///    produces them (a small first bucket so communication starts early, then
///    `bucket-mb` caps), each placed right after its last gradient;
///  - the returned loss and correct count are summed across devices; @predict_step's
///    per-example outputs are not (each device keeps its rows, ir/predict_graph.h).
/// On one device only the split (the host-to-device copy) is inserted.
/// With `groups=G` (G divides the device count, 1 < G < devices) each gradient bucket is
/// reduced hierarchically, as Horovod does across processes: an all_reduce within each of G
/// consecutive groups of devices, an all_reduce across the groups' first devices, and a
/// broadcast back within each group. Per group of a power-of-two size the sums are the
/// flat all_reduce's bit for bit (the local communicator's reduction tree, backend/cpu).
/// With `sync-bn=true` the batch statistics of every fused batch norm (and their backward
/// sums) are all-reduced too: sync batch norm (see syncBatchNorm in the .cc file).
class InsertCollectives final : public Pass {
 public:
  static constexpr absl::string_view kName = "insert-collectives";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);
  InsertCollectives(double bucket_mb, double first_bucket_mb, int64_t groups, bool sync_bn,
                    ir::DType wire)
      : bucket_bytes_(static_cast<int64_t>(bucket_mb * (1 << 20))),
        first_bucket_bytes_(static_cast<int64_t>(first_bucket_mb * (1 << 20))),
        groups_(groups),
        sync_bn_(sync_bn),
        wire_(wire) {}

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  int64_t bucket_bytes_, first_bucket_bytes_, groups_;
  bool sync_bn_;
  /// The dtype gradients travel in (allreduce-dtype): f32, or bf16 for half the bytes,
  /// as Horovod's fp16 compression does; the updates read the bf16 sums as they are.
  ir::DType wire_;
};

}  // namespace tandem::passes
