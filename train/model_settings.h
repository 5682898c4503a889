#pragma once

// How a model is compiled for training: `tandem train`'s flags (tools/tandem/flags.cc fills
// ModelSettings from them) and the public API's TrainConfig (tandem/tandem.h fills the
// same struct). One resolution checks them and fills in the model's defaults, so the CLI
// and the API compile the same module from the same settings and refuse the same mistakes,
// each naming the setting in its own words (train/setting.h).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "ir/optimizer_configs.h"
#include "ir/types.h"
#include "runtime/lr_schedule.h"
#include "train/compile.h"
#include "train/setting.h"

namespace tandem::training {

/// How the global batch splits across the devices.
struct Split {
  enum class Kind { kEven, kWeights, kAuto };
  Kind kind = Kind::kEven;
  /// kWeights: one positive weight per device (3,1: three quarters on the first).
  std::vector<double> weights;

  static Split even() { return {}; }
  static Split byWeights(std::vector<double> w) { return {Kind::kWeights, std::move(w)}; }
  /// Start even, then re-plan from each device's measured speed (training only).
  static Split measured() { return {Kind::kAuto, {}}; }
  /// "even", "3,1", "auto": as the setting is written.
  std::string text() const;
};

/// Where a model runs and the training settings written into its step; unset
/// hyper-parameters take the model's defaults (ModelSpec::defaults). Each field is the
/// Setting of the same key (`weight_decay`), which errors name in the front end's words.
/// Front ends that get text parse it with train/settings_text.h.
struct ModelSettings {
  /// The devices this process drives; with `ranks` processes, each gives its own and the
  /// module spans every rank's.
  std::vector<ir::Device> devices{ir::Device{}};
  /// Unset: 256, and for dump at least one example per device (a 4096-device dump needs
  /// no --batch); train refuses a batch smaller than the device count instead, and a
  /// training session sets it from its data first (defaultBatch: less for small data).
  std::optional<int64_t> batch;
  /// The optimizer and its values (ir/optimizer_configs.h: a struct per optimizer update op
  /// of ir/ops.td, its fields the op's hyper-parameters); unset: the model's.
  std::optional<ir::OptimizerConfig> optimizer;
  /// The learning-rate schedule (constant, step:EPOCHS:GAMMA, cosine) and its warmup in
  /// steps: any but constant without warmup compiles the step with feed-learning-rate
  /// (runtime/lr_schedule.h). Unset: the model's (ModelSpec::defaults; its warmup is in
  /// epochs).
  std::optional<std::string> schedule;
  std::optional<int64_t> warmup;
  /// The max global norm of the gradients (clip-grad-norm); unset: none.
  std::optional<double> clip_grad_norm;
  /// The training loss's, in [0, 1); unset: the model's (0 for all).
  std::optional<double> label_smoothing;
  std::optional<std::string> init;
  double bucket_mb = 25, first_bucket_mb = 1;
  int64_t allreduce_groups = 1;
  Split split;
  bool no_fuse = false;
  bool no_recompute = false;
  bool plain_layout = false;
  bool sync_bn = false;
  /// The shard-weight-update pass (reduce_scatter, sharded optimizer state and update,
  /// all_gather).
  bool shard_updates = false;
  /// The group-updates pass; unset: where a device is a CUDA one.
  std::optional<bool> group_updates;
  /// bf16: the mixed-precision pass.
  ir::FloatType precision = ir::FloatType::kF32;
  /// The dtype gradients are reduced in.
  ir::FloatType allreduce_dtype = ir::FloatType::kF32;
  /// Processes that each drive `devices` (dump --ranks P; train: the processes mpirun
  /// started): the module's devices are these ranks' devices, rank by rank.
  int ranks = 1;
};

/// A model and how to compile it, resolved from ModelSettings.
struct ModelChoice {
  ModelSpec spec;
  CompileOptions compile;
  /// --split auto: start even, then re-plan from measured device speeds (train only).
  bool auto_split = false;
  /// The learning-rate schedule: --schedule, or the model's.
  std::string schedule = "constant";
  /// --warmup in steps; unset: the model's warmup_epochs, in steps once an epoch's length
  /// is known (warmupSteps).
  std::optional<int64_t> warmup_steps;
  int64_t warmup_epochs = 0;
  /// warmup_steps is the model's (TrainingDefaults::warmup_steps), not a given setting.
  bool warmup_from_model = false;

  /// The warmup of a run of `epochs` epochs of `steps_per_epoch` updates: --warmup, or the
  /// model's warmup_epochs when the run is longer; a run no longer than that gets a tenth
  /// of its steps (as a warmup ratio of 0.1 would), so that its schedule has steps left.
  int64_t warmupSteps(int64_t steps_per_epoch, int epochs) const;
  /// "5" or "1 epoch": the warmup as settings lists compare it, before the data is read.
  std::string warmupText() const;
};

/// Checks `settings` together (devices parse, the batch covers them, weights match them,
/// the initializer and the optimizer's values are in range) and fills in `spec`'s defaults
/// for what was not given. `for_training` also requires a backend for every device of
/// this process. Errors name the setting as `names` says (`--batch: ...`).
absl::StatusOr<ModelChoice> resolveModel(const ModelSpec& spec, const ModelSettings& settings,
                                         bool for_training, const SettingNames& names);

/// The run's learning-rate schedule over `epochs` of `steps_per_epoch` updates, from the
/// choice's schedule and warmup. A model's warmup (in epochs) that leaves the schedule no
/// steps is said to be the model's (`--epochs 1: vit's warmup of 2 epochs ...`), or, for a
/// run trained `by_steps`, `--steps 50: gpt's warmup of 100 ...`.
absl::StatusOr<runtime::LrSchedule> learningRateSchedule(const ModelChoice& choice,
                                                         int64_t steps_per_epoch, int epochs,
                                                         const SettingNames& names,
                                                         bool by_steps = false);

/// The shortest text that reads back as the same double, so that settings compare exactly.
std::string exactNumber(double v);

/// The settings a resumed run must share with the run that wrote its checkpoint, as
/// (key, value) (train/setting.h's keys, as the checkpoint stores them): each changes what a step
/// computes (the batch and the mean over it, the update's hyper-parameters, the arithmetic, whether
/// batch-norm statistics are global) or which examples come in which order (the seed, the training
/// images). The rest may change: devices (every device then starts from the first device's values;
/// another count or split adds in another order, so the figures are close, not the same bits),
/// buckets, layouts, kernels, --init (the checkpoint's values replace the initial ones)
/// and --epochs (to train on; but a model's warmup follows a run no longer than it, so
/// such a run resumes with that --epochs or the --warmup it was written with).
/// `train_count`: the training images of the run, `epochs` its --epochs.
std::vector<std::pair<std::string, std::string>> resumeSettings(const ModelChoice& choice,
                                                                const ModelSettings& settings,
                                                                uint64_t seed, int64_t train_count,
                                                                int epochs);

}  // namespace tandem::training
