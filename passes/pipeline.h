#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/optimizer_configs.h"
#include "ir/types.h"
#include "passes/pass.h"

namespace tandem::passes {

/// Parses "autodiff{lr=0.2},replicate{devices=[cpu:0,cpu:1]},insert-collectives,dce".
/// Commas inside braces or brackets belong to the options. An empty text is an empty
/// pipeline. Errors name the pass or option at fault.
absl::StatusOr<std::vector<std::unique_ptr<Pass>>> parsePipeline(absl::string_view text);

/// What the default pipeline is made for.
struct PipelineConfig {
  std::vector<ir::Device> devices{ir::Device{}};  // the default device: cpu:0
  std::vector<double> weights;  // empty: even split
  /// The optimizer and its hyper-parameters: a struct per optimizer update op of ir/ops.td
  /// (ir/optimizer_configs.h), its fields the op's attributes.
  ir::OptimizerConfig optimizer = ir::SgdConfig{};
  /// Run feed-learning-rate: the updates read a factor the runtime writes every step (CLI
  /// --schedule other than constant, or --warmup).
  bool lr_schedule = false;
  /// > 0: run clip-grad-norm with this max norm (CLI --clip-grad-norm).
  double clip_grad_norm = 0;
  /// Weight decay on the matrices only (autodiff{decay=matrices}): the model's parameter
  /// groups (TrainingDefaults::decay_matrices_only).
  bool decay_matrices_only = false;
  /// Run shard-weight-update: reduce_scatter, sharded optimizer state and update,
  /// all_gather (CLI --shard-updates).
  bool shard_updates = false;
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  /// > 1: hierarchical gradient reduction over this many groups of devices.
  int64_t allreduce_groups = 1;
  /// Alignment of every buffer plan-memory places (the devices' targets' largest,
  /// ir::targetAlignment).
  int64_t alignment = 64;
  /// plan-memory gives each view (reshape, flatten) its operand's bytes; false:
  /// plan-memory{views=copy}, a buffer and a copy each (to compare; the numbers are equal).
  bool alias_views = true;
  /// Run fuse-conv-bn-relu, fuse-relu-pool and (where every device has its kernels)
  /// fuse-conv-relu-pool (CLI --no-fuse turns them off).
  bool fuse = true;
  /// With fusion, run recompute-bn-relu: backward recomputes conv -> bn -> relu outputs
  /// (less activation memory, one elementwise pass more per layer; CLI --no-recompute).
  bool recompute = true;
  /// Run assign-layouts: activations in each device's preferred layout between the kernels
  /// that take it (CLI --plain-layout turns it off: every tensor NCHW).
  bool layouts = true;
  /// choose-algorithms{conv=direct}: no convolution algorithm whose rounding differs from
  /// the direct computation's (Winograd; the backend setting conv_algorithm=direct).
  bool exact_convolutions = false;
  /// Run mixed-precision{dtype=bf16} first (CLI --precision bf16).
  bool bf16 = false;
  /// Reduce gradients in bf16 (CLI --allreduce-dtype bf16): half the bytes on the wire.
  bool bf16_allreduce = false;
  /// Sync batch norm: all-reduce the batch statistics across devices (CLI --sync-bn).
  bool sync_bn = false;
  /// Run group-updates: one grouped update (sgd_update_group, adamw_update_group) per device and bucket. Unset: when any
  /// device is a CUDA one, where it saves a launch per parameter (CPU devices run the
  /// same loop either way; CLI --group-updates).
  std::optional<bool> group_updates;
};

/// The pipeline `tandem dump` and `tandem train` run, as text.
std::string defaultPipeline(const PipelineConfig& config);

/// The pipeline of a prediction module (frontend/build_module.h's buildPredictModule): the
/// default pipeline's passes that apply to a forward alone, with `config`'s devices,
/// split, precision, fusion, layouts and alignment: [mixed-precision],
/// [fuse-conv-bn-relu], replicate, insert-collectives, dce, schedule and the plan.
std::string predictPipeline(const PipelineConfig& config);

/// The names of the default pipeline's passes, in order (for --after), fusion included.
std::vector<std::string> defaultPassNames();

}  // namespace tandem::passes
