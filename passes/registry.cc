#include "passes/registry.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/assign_layouts.h"
#include "passes/assign_streams.h"
#include "passes/autodiff.h"
#include "passes/choose_algorithms.h"
#include "passes/clip_grad_norm.h"
#include "passes/dce.h"
#include "passes/feed_learning_rate.h"
#include "passes/fuse_conv_bn_relu.h"
#include "passes/fuse_conv_relu_pool.h"
#include "passes/fuse_relu_pool.h"
#include "passes/group_updates.h"
#include "passes/insert_collectives.h"
#include "passes/mixed_precision.h"
#include "passes/plan_events.h"
#include "passes/plan_memory.h"
#include "passes/recompute_bn_relu.h"
#include "passes/replicate.h"
#include "passes/schedule.h"
#include "passes/shard_weight_update.h"

namespace tandem::passes {

const std::vector<PassInfo>& registeredPasses() {
  static const auto* passes = new std::vector<PassInfo>{
      {MixedPrecision::kName,
       "forward graphs in bf16 with f32 variables, losses and statistics (before autodiff)",
       "dtype=bf16", MixedPrecision::create},
      {Autodiff::kName, "append backward and optimizer updates to @train_step",
       Autodiff::optionsHelp(), Autodiff::create},
      {FeedLearningRate::kName,
       "optimizer updates read the learning-rate schedule's factor, @lr_scale, fed every step", "",
       FeedLearningRate::create},
      {FuseConvBnRelu::kName,
       "conv2d -> batch_norm [-> add] [-> relu] as fused nodes, forward and backward", "",
       FuseConvBnRelu::create},
      {FuseReluPool::kName,
       "relu -> avg_pool2d as one avg_pool2d{relu} in forward and backward (relu's output never "
       "written)",
       "", FuseReluPool::create},
      {FuseConvReluPool::kName,
       "conv2d -> avg_pool2d{relu} of 2x2 windows as one conv2d_relu_avg_pool, and its backward "
       "filter gradient computing the convolution again (first layers of at most 9 products an "
       "output; the convolution's output never in memory)",
       "", FuseConvReluPool::create},
      {Replicate::kName, "one copy of each graph per device, each on its slice of the batch",
       "devices=N|[cpu:0,...] (required), weights=[w0,...]", Replicate::create},
      {InsertCollectives::kName,
       "split inputs, broadcast initial values, all_reduce gradients in buckets",
       "bucket-mb=25, first-bucket-mb=1, groups=1, sync-bn=false, allreduce-dtype=f32",
       InsertCollectives::create},
      {ClipGradNorm::kName,
       "gradient clipping by global norm: one clip_grad_norm per device after the all_reduce",
       "max-norm=X (required)", ClipGradNorm::create},
      {ShardWeightUpdate::kName,
       "per gradient bucket: reduce_scatter, each device steps its shard with sharded optimizer "
       "state, all_gather of the stepped weights",
       "", ShardWeightUpdate::create},
      {RecomputeBnRelu::kName,
       "backward recomputes conv -> bn -> relu outputs instead of keeping them from forward", "",
       RecomputeBnRelu::create},
      {DeadCodeElimination::kName, "remove nodes whose results are unused", "",
       DeadCodeElimination::create},
      {Schedule::kName, "issue order for the compute and comm streams: updates after backward", "",
       Schedule::create},
      {GroupUpdates::kName,
       "one grouped update (sgd_update_group, adamw_update_group) per device and gradient bucket: "
       "one multi-tensor launch on GPUs",
       "", GroupUpdates::create},
      {AssignStreams::kName,
       "the execution plan begins: the stream of its device each node runs on", "",
       AssignStreams::create},
      {PlanEvents::kName, "the waits between streams (the runtime's events)", "",
       PlanEvents::create},
      {AssignLayouts::kName,
       "activations kept in each device's preferred layout (nChw16c, NHWC) where kernels take "
       "it",
       "", AssignLayouts::create},
      {ChooseAlgorithms::kName,
       "the algorithm each kernel with a choice runs (CPU convolutions: oneDNN plain or "
       "blocked, Winograd, im2col + matmul), by its target's measured rule",
       "conv=auto", ChooseAlgorithms::create},
      {PlanMemory::kName, "per-device arenas with buffers reused by liveness", "alignment=64",
       PlanMemory::create},
  };
  return *passes;
}

absl::StatusOr<std::unique_ptr<Pass>> createPass(absl::string_view name, PassOptions& opts) {
  for (const PassInfo& info : registeredPasses())
    if (info.name == name) return info.create(opts);
  return absl::NotFoundError(absl::StrCat("unknown pass '", name, "' (known: ",
                                          absl::StrJoin(registeredPasses(), ", ",
                                                        [](std::string* o, const PassInfo& p) {
                                                          o->append(p.name.data(), p.name.size());
                                                        }),
                                          ")"));
}

}  // namespace tandem::passes
