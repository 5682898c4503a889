#pragma once

// One training run, below both front ends: checks the settings (TrainConfig) and the
// data, agrees with the other processes of a multi-process run, compiles the model, loads
// it onto its devices, continues a checkpoint, runs the epochs with evaluation, writes
// checkpoints, re-plans --split auto and stops on a non-finite loss or a stop signal. What
// happens is told to a TrainListener as events: `tandem train` prints them (header,
// progress bar, table, CSV, plot, trace); the public API hands them to its callbacks.
// Nothing here knows how a front end spells a setting (train/setting.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "ir/ir.h"
#include "runtime/checkpoint.h"
#include "runtime/lr_schedule.h"
#include "runtime/trainer.h"
#include "train/auto_split.h"
#include "train/loaded_model.h"
#include "train/model_settings.h"
#include "train/setting.h"
#include "train/train_config.h"

namespace tandem::training {

/// What a run is, once compiled and loaded: the header a front end prints.
struct RunInfo {
  const ModelChoice& choice;
  const ir::Module& module;
  int64_t train_count = 0, test_count = 0, steps_per_epoch = 0;
  /// The learning-rate schedule over the run's steps (null: constant).
  const runtime::LrSchedule* schedule = nullptr;
  /// Set when the run continues a checkpoint (its path and where it stood).
  const runtime::Checkpoint* resumed = nullptr;
  std::string resumed_path;
};

/// A step just finished.
struct StepEvent {
  int epoch = 0;
  const runtime::StepReport& report;
  runtime::Executor& executor;
};

/// A checkpoint written: after an epoch, every TrainConfig::checkpoint_every steps, or where
/// the run stopped.
struct CheckpointEvent {
  /// Where a run resumed from it goes on: epoch `epoch` after `steps` of its steps (0 for
  /// the checkpoint after epoch - 1 finished).
  int epoch = 0;
  int64_t steps = 0;
  std::string dir;
};

/// How a run (or fit) ended.
struct RunEnd {
  enum class Why {
    kFinished,         // every epoch up to TrainConfig::epochs
    kStopSignal,       // a stop signal (the listener's), agreed by every process
    kStoppedByCaller,  // a listener's onStep or onEpoch said stop
    kNonFinite,        // the loss was NaN or infinite (and allow_nonfinite is off)
  };
  Why why = Why::kFinished;
  int signal = 0;  // kStopSignal's
  int epoch = 0;   // the epoch it ended in
  /// Where in the epoch: the steps done and their examples (a stop inside it); whether it
  /// stopped while evaluating, or after the epoch's row.
  int64_t steps_done = 0, examples_done = 0;
  bool while_evaluating = false, after_epoch = false;
  /// kNonFinite: the step, and why (which variable, what to change), in the front end's words.
  runtime::StepReport bad_step;
  std::string cause;
  /// Whether a checkpoint holds the run where it ended (a resumed run continues there).
  bool checkpointed = false;
};

/// What a front end hears of a run. Every method has a default that does nothing.
class TrainListener {
 public:
  virtual ~TrainListener() = default;
  /// What the run is doing now ("compiling lenet for 2 devices"): a status line, a crash
  /// report's context.
  virtual void onActivity(const std::string& what) { (void)what; }
  /// The compiled module, before it loads: a front end may replace it with one of the same
  /// kind (tandem train --module) or warn about settings it finds inert.
  virtual absl::Status onCompiled(std::unique_ptr<ir::Module>& module) {
    (void)module;
    return absl::OkStatus();
  }
  /// After @init ran on a fresh run (not one continuing a checkpoint): a front end may
  /// write values of its own (an imported model's weights).
  virtual absl::Status onInitialized(runtime::Executor& executor) {
    (void)executor;
    return absl::OkStatus();
  }
  /// Loaded and ready, before the first step.
  virtual absl::Status onStart(const RunInfo& run) {
    (void)run;
    return absl::OkStatus();
  }
  /// After every step (and any checkpoint it wrote); false stops the run after it.
  virtual bool onStep(const StepEvent& step) {
    (void)step;
    return true;
  }
  /// A checkpoint was written (on the process that writes them).
  virtual absl::Status onCheckpoint(const CheckpointEvent& checkpoint) {
    (void)checkpoint;
    return absl::OkStatus();
  }
  /// --split auto re-planned (`why`: what it measured, or "in the run resumed").
  virtual absl::Status onReplan(const runtime::SplitReplan& replan, const std::string& why) {
    (void)replan, (void)why;
    return absl::OkStatus();
  }
  /// A finished and evaluated epoch (a resumed run's earlier ones first, `replayed`);
  /// StatusOr(false) stops the run after it.
  virtual absl::StatusOr<bool> onEpoch(const runtime::EpochFigures& epoch, bool replayed) {
    (void)epoch, (void)replayed;
    return true;
  }
  /// The stop signal this process received (0: none). The processes of a run agree on the
  /// largest after every step, so that they stop at the same one.
  virtual int stopSignal() { return 0; }
};

/// The global batch of a run that gives none: 256, halved (down to 32, and never below
/// the device count) while an epoch of `train_examples` would take fewer than 16 steps, so
/// that a small data set (scikit-learn's 1,797 digits) gets enough updates in ten epochs.
int64_t defaultBatch(int64_t train_examples, int64_t devices);

/// The window length token data (tokens:, text:) is read in for `spec` when the data's spec
/// gives none: the length of its input x of integer ids [T] (a language model's context);
/// 0 for a model without one.
int64_t windowLengthOf(const ModelSpec& spec);

/// Whether the run writes its checkpoints into the directory it resumes from (it then
/// replaces the checkpoint there).
bool writesWhereItResumes(const TrainConfig& config);

class TrainingSession {
 public:
  /// Everything up to a loaded, initialized model (or one restored from config.resume):
  /// the settings resolved and checked, the other processes agreeing, the checkpoint to
  /// continue read and checked, the checkpoint directory prepared, the data read, the
  /// schedule sized, the model compiled and loaded. Errors name the setting at fault as
  /// `names` says. Both `names` and `listener` must outlive the session.
  static absl::StatusOr<std::unique_ptr<TrainingSession>> create(const ModelSpec& spec,
                                                                 TrainConfig config,
                                                                 const SettingNames& names,
                                                                 TrainListener& listener);

  /// Trains the epochs left up to TrainConfig::epochs, evaluating after each and writing
  /// the checkpoints asked for; returns how it ended.
  absl::StatusOr<RunEnd> fit();
  /// Loss and metrics over the test data, or over `data` (fields as the model's inputs).
  absl::StatusOr<runtime::PassResult> evaluate();
  absl::StatusOr<runtime::PassResult> evaluateOn(const runtime::data::ExampleSource& data);
  /// Writes a checkpoint of the run as it stands into `dir` (created if missing; `replace`
  /// overwrites one there, else that is an error; errors begin with `words.setting`).
  absl::Status save(const std::string& dir, bool replace, runtime::CheckpointWriter::Words words);

  const ModelChoice& choice() const { return choice_; }
  bool scheduled() const { return choice_.compile.pipeline.lr_schedule; }
  const std::vector<runtime::EpochFigures>& history() const { return history_; }
  int nextEpoch() const { return next_epoch_; }
  int64_t stepsPerEpoch() const { return model_->stepsPerEpoch(); }
  runtime::Executor& executor() { return model_->trainer().executor(); }
  /// The training steps' time in this process so far, and of it the time spent waiting
  /// for the loader's batches (what the prefetching did not hide).
  double trainSeconds() const { return train_seconds_; }
  double inputWaitSeconds() const { return input_wait_seconds_; }
  /// Where checkpoints are written (unset: nowhere).
  std::optional<std::string> checkpointDir() const;

 private:
  TrainingSession(const SettingNames& names, TrainListener& listener)
      : names_(names), listener_(listener) {}
  absl::Status prepare(const ModelSpec& spec);
  absl::Status trainBySteps();
  absl::Status readResumed();
  absl::Status openData();
  absl::Status checkData();
  absl::Status checkResumedFits();
  absl::Status compileAndLoad();
  absl::Status start();
  absl::Status replayResumed();
  /// One epoch's steps; sets `end` when the run ends inside it.
  absl::StatusOr<runtime::PassResult> trainEpoch(int epoch, RunEnd& end);
  bool onStep(int epoch, const runtime::StepReport& s, RunEnd& end);
  absl::StatusOr<bool> finishEpoch(int epoch, const runtime::PassResult& trained, RunEnd& end);
  bool stopAgreed();
  std::vector<std::pair<std::string, std::string>> resumeSettings() const;
  runtime::Checkpoint checkpointAt(int epoch, const runtime::EpochProgress& progress) const;
  absl::Status saveCheckpoint(int epoch, const runtime::EpochProgress& progress);
  std::string nonFiniteCause();

  const SettingNames& names_;
  TrainListener& listener_;
  TrainConfig config_;
  ModelChoice choice_;
  // Shared with the program that holds the examples (the API's); the loaders read it.
  std::shared_ptr<const TrainingData> data_;
  runtime::LrSchedule schedule_;
  std::optional<runtime::Checkpoint> resumed_;
  std::string resumed_path_;
  std::optional<runtime::CheckpointWriter> checkpoints_;
  std::unique_ptr<LoadedModel> model_;
  std::optional<AutoSplit> auto_split_;
  std::vector<runtime::EpochFigures> history_;
  std::vector<runtime::SplitReplan> replans_;
  // Where fit goes on: the epoch, and what is done of it (a checkpoint written inside one).
  int next_epoch_ = 1;
  runtime::EpochProgress progress_;
  // The stop signal every process acts on (0: none yet), and a failure agreeing on it.
  int stop_signal_ = 0;
  double train_seconds_ = 0, input_wait_seconds_ = 0;
  absl::Status stop_status_, step_status_;
};

}  // namespace tandem::training
