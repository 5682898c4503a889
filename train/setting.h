#pragma once

// The settings of a training run, by identity rather than by spelling. The training
// library names a setting in an error through the SettingNames its front end hands it
// (`tandem train` says `--weight-decay`, the public API `TrainConfig::weight_decay`), so
// no message is written in one front end's words and rewritten into another's; a
// checkpoint stores each setting under its key (`weight_decay`).

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::training {

// X(enumerator, key): the key is the setting's field name in TrainConfig (snake_case).
// clang-format off
#define TANDEM_TRAIN_SETTINGS(X) \
  X(kModel, "model") \
  X(kDevices, "devices") \
  X(kBatch, "batch") \
  X(kOptimizer, "optimizer") \
  X(kLr, "lr") \
  X(kMomentum, "momentum") \
  X(kWeightDecay, "weight_decay") \
  X(kBeta1, "beta1") \
  X(kBeta2, "beta2") \
  X(kEps, "eps") \
  X(kSchedule, "schedule") \
  X(kWarmup, "warmup") \
  X(kClipGradNorm, "clip_grad_norm") \
  X(kLabelSmoothing, "label_smoothing") \
  X(kInit, "init") \
  X(kBucketMb, "bucket_mb") \
  X(kFirstBucketMb, "first_bucket_mb") \
  X(kAllreduceGroups, "allreduce_groups") \
  X(kSplit, "split") \
  X(kNoFuse, "no_fuse") \
  X(kNoRecompute, "no_recompute") \
  X(kPlainLayout, "plain_layout") \
  X(kSyncBn, "sync_bn") \
  X(kShardUpdates, "shard_updates") \
  X(kGroupUpdates, "group_updates") \
  X(kPrecision, "precision") \
  X(kAllreduceDtype, "allreduce_dtype") \
  X(kEpochs, "epochs") \
  X(kSteps, "steps") \
  X(kEvalEvery, "eval_every") \
  X(kSeed, "seed") \
  X(kData, "data") \
  X(kTestData, "test_data") \
  X(kValFraction, "val_fraction") \
  X(kAugment, "augment") \
  X(kImageSize, "image_size") \
  X(kLimitTrain, "limit_train") \
  X(kLimitTest, "limit_test") \
  X(kCheckpoint, "checkpoint") \
  X(kCheckpointEvery, "checkpoint_every") \
  X(kResume, "resume") \
  X(kAllowNonfinite, "allow_nonfinite") \
  X(kThreadsPerDevice, "threads_per_device") \
  X(kConvAlgorithm, "conv_algorithm") \
  X(kNoTf32, "no_tf32") \
  X(kModule, "module") \
  X(kStopAfter, "stop_after")
// clang-format on

enum class Setting {
#define TANDEM_SETTING_ENUMERATOR(name, key) name,
  TANDEM_TRAIN_SETTINGS(TANDEM_SETTING_ENUMERATOR)
#undef TANDEM_SETTING_ENUMERATOR
};

/// The setting's key: its field in TrainConfig, and its name in a checkpoint.
absl::string_view settingKey(Setting s);
/// The setting a key names (also today's checkpoints' `--weight-decay`); false if none.
bool settingOfKey(absl::string_view key, Setting* out);

/// How a front end names each setting in what it prints.
class SettingNames {
 public:
  virtual ~SettingNames() = default;
  virtual std::string name(Setting s) const = 0;
  std::string operator()(Setting s) const { return name(s); }
};

/// The library's own words: each setting's key (`weight_decay`), for callers with none.
const SettingNames& settingKeys();

/// An InvalidArgument error "NAME: message", NAME the front end's word for `s`.
absl::Status settingError(const SettingNames& names, Setting s, absl::string_view message);

}  // namespace tandem::training
