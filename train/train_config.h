#pragma once

// Everything a training run is asked to do, typed: how the model compiles (ModelSettings),
// how long and on what it trains, where its checkpoints go, how the devices run it. Both
// front ends fill one: `tandem train` from its flags (tools/tandem/cmd_train.cc), the public
// API from its own TrainConfig (tandem/tandem.h). Errors about a field name it through the
// front end's SettingNames (train/setting.h), never in one front end's words.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor.h"
#include "runtime/split_balancer.h"
#include "train/model_settings.h"
#include "train/training_data.h"

namespace tandem::training {

struct TrainConfig {
  /// The model's compile settings: devices, batch, optimizer and its values, schedule,
  /// precision, split, buckets, layouts.
  ModelSettings model;
  int epochs = 10;
  /// Train for this many steps instead of epochs (token data, whose examples are random
  /// windows): an evaluation on the validation windows every `eval_every` steps (unset:
  /// every 250, or once at the end of a shorter run), which divides `steps`. Each such
  /// period is an epoch of the run (its table row, its checkpoint, its place to resume).
  std::optional<int64_t> steps;
  std::optional<int64_t> eval_every;
  /// Seeds the initial values and the order of the examples (batch i of epoch e depends
  /// only on seed, e and i).
  uint64_t seed = 0;
  /// The data: its spec (--data), the test part, augmentation (train/training_data.h).
  DataSource data;
  /// Only the first N training (test) examples; unset: all.
  std::optional<int64_t> limit_train, limit_test;
  /// A checkpoint is written into `checkpoint` after every epoch (and every
  /// `checkpoint_every` steps); `resume` names one to continue. When both name the same
  /// directory, the run goes on writing there.
  std::optional<std::string> checkpoint, resume;
  std::optional<int64_t> checkpoint_every;
  /// Go on when the loss is NaN or infinite (else the run stops at that step and says why).
  bool allow_nonfinite = false;
  /// How the devices run the step: each backend's settings, tracing, step recording. The
  /// seed is `seed`.
  runtime::ExecutorOptions executor;
  /// --split auto's balancer (a test may fix what it measures).
  runtime::SplitBalancer::Options balancer;
  /// Settings of the front end's own that every process of a multi-process run must share
  /// too (as (name, value)): compared at start-up with the config's.
  std::vector<std::pair<std::string, std::string>> also_shared;
};

}  // namespace tandem::training
