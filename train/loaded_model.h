#pragma once

// A compiled model on its devices with the data it trains and evaluates on: the
// executor, the trainer and the two batch loaders, which TrainingSession
// (train/training_session.h) drives through the epochs of a run.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/checkpoint.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/integer_width_source.h"
#include "runtime/executor.h"
#include "runtime/lr_schedule.h"
#include "runtime/trainer.h"

namespace tandem::training {

/// Images per device of the compiled step: the sizes of the split of its images input.
std::vector<int64_t> perDeviceBatch(const ir::Module& m);

class LoadedModel {
 public:
  struct Options {
    /// The executor's (its seed draws the initial values).
    runtime::ExecutorOptions executor;
    /// The data order's seed: batch i of epoch e depends only on (seed, e, i).
    uint64_t seed = 0;
    /// Set when the module feeds the learning rate (feed-learning-rate).
    std::optional<runtime::LrSchedule> schedule;
    /// What a checkpoint of this run names and must match when resumed (the model's
    /// name and model_settings.h's resumeSettings).
    std::string model;
    std::vector<std::pair<std::string, std::string>> settings;
    /// The names of the step's metrics, in order (buildModule's).
    std::vector<std::string> metrics;
  };

  /// Loads `compiled` onto its devices and makes the loaders of `train` (shuffled, last
  /// partial batch dropped) and `test` (in order, padded), both of which must outlive the
  /// session; then checks every dimension of both against the module, before anything
  /// runs (Trainer::checkData: the error names the data's file and what the module takes).
  static absl::StatusOr<std::unique_ptr<LoadedModel>> create(
      std::unique_ptr<ir::Module> compiled, const runtime::data::ExampleSource& train,
      const runtime::data::ExampleSource& test, Options options);

  /// Runs @init (parameters drawn on the first device and broadcast to all).
  absl::Status initialize() { return trainer_->initialize(); }
  /// Writes a checkpoint's variables into every device (`path` names it in errors).
  absl::Status restore(const runtime::Checkpoint& c, const std::string& path);

  /// Epoch `epoch` (from 1) of the training data, from `from` on (a resumed epoch's steps
  /// and sums; zero for a new epoch): each update's learning-rate factor and step index
  /// are its index in the whole run, so a resumed epoch computes what the run it
  /// continues would have. `on_step` is called after every step; false ends the epoch.
  absl::StatusOr<runtime::PassResult> trainEpoch(int epoch, const runtime::EpochProgress& from,
                                                 const runtime::Trainer::StepCallback& on_step);
  /// Loss and accuracy over the whole test data (`keep_going` is asked after each batch).
  absl::StatusOr<runtime::PassResult> evaluate(const std::function<bool()>& keep_going = nullptr);
  /// The same over other data with the module's inputs (a loader of its own).
  absl::StatusOr<runtime::PassResult> evaluateOn(const runtime::data::ExampleSource& data);

  /// A finished epoch's figures, as the table, the metrics file and a checkpoint keep them.
  runtime::EpochFigures figures(int epoch, const runtime::PassResult& train,
                                const runtime::PassResult& test);
  /// The run as it stands after `progress` of `epoch` (at an epoch's end: the next epoch,
  /// at step 0), with every finished epoch's figures; the writer captures the variables.
  runtime::Checkpoint checkpoint(int epoch, const runtime::EpochProgress& progress,
                                 const std::vector<runtime::EpochFigures>& history) const;

  runtime::Trainer& trainer() { return *trainer_; }
  runtime::data::BatchLoader& trainLoader() { return *train_loader_; }
  runtime::data::BatchLoader& testLoader() { return *test_loader_; }
  int64_t batch() const { return batch_; }
  int64_t stepsPerEpoch() const { return train_loader_->batchesPerEpoch(); }
  const Options& options() const { return options_; }

 private:
  LoadedModel() = default;

  Options options_;
  int64_t batch_ = 0;
  std::unique_ptr<runtime::Trainer> trainer_;
  // The sources at the inputs' integer widths, where they differ (declared before the
  // loaders, which read them, so that they outlive them).
  std::unique_ptr<runtime::data::IntegerWidthSource> train_view_, test_view_;
  std::unique_ptr<runtime::data::BatchLoader> train_loader_, test_loader_;
};

}  // namespace tandem::training
