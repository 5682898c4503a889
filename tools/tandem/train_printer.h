#pragma once

// What `tandem train` shows of a training run (train/training_session.h's events): the
// header, a progress bar on a terminal, one table row per epoch, the metrics CSV, the
// learning-curve picture, the Chrome trace, the profile, the line that says how a stopped
// run ended; and what only the CLI adds to a run: --module's module, an imported ONNX
// model's values, the test build's hooks, warnings about flags that change nothing.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/onnx_model.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/plot.h"
#include "tools/tandem/progress.h"
#include "tools/tandem/stop_signal.h"
#include "tools/tandem/trace_file.h"
#include "train/training_session.h"

namespace tandem::tools {

/// The files a run writes besides checkpoints: claimed and opened before anything slow,
/// so that a bad path fails at once (only rank 0 has any).
struct TrainOutputs {
  OutputFile out = OutputFile::standardOutput();
  std::optional<OutputFile> csv;
  std::optional<TraceFile> trace;
  std::optional<PlotFile> plot;

  static absl::StatusOr<TrainOutputs> open(const TrainFlags& f, int rank);
};

class TrainPrinter final : public training::TrainListener {
 public:
  TrainPrinter(const TrainFlags& f, TrainOutputs& outputs, StopSignals& stop,
               std::shared_ptr<ImportedValues> imported);

  void onActivity(const std::string& what) override;
  absl::Status onCompiled(std::unique_ptr<ir::Module>& module) override;
  absl::Status onInitialized(runtime::Executor& executor) override;
  absl::Status onStart(const training::RunInfo& run) override;
  bool onStep(const training::StepEvent& step) override;
  absl::Status onReplan(const runtime::SplitReplan& replan, const std::string& why) override;
  absl::StatusOr<bool> onEpoch(const runtime::EpochFigures& epoch, bool replayed) override;
  int stopSignal() override { return stop_.signal(); }

  /// After fit: a failure of the CLI's own during the steps (a trace that could not be
  /// written), then the trace, the profile and the files finished; the exit code of a run
  /// that ended as `end` says, with its line on standard error.
  absl::StatusOr<int> finish(training::TrainingSession& session, const training::RunEnd& end);

 private:
  std::string header(const training::RunInfo& run) const;
  /// The learning rate of epoch `epoch`'s last update.
  double lrOfEpoch(int epoch) const;
  std::string endingLine(training::TrainingSession& session, const training::RunEnd& end) const;

  const TrainFlags& f_;
  TrainOutputs& outputs_;
  StopSignals& stop_;
  std::shared_ptr<ImportedValues> imported_;
  // From onStart: the model's name, devices, batch and learning rate as the picture's
  // title says them, and the schedule (unset: constant) for the table's lr column.
  std::string title_;
  double lr_ = 0;
  int64_t steps_per_epoch_ = 0;
  std::optional<runtime::LrSchedule> schedule_;
  // What the table shows, from the model (examplesOf): a classifier's accuracies, or the
  // test loss and the model's other metrics; what an example is called, and its tokens.
  bool accuracy_ = true;
  std::vector<std::string> metrics_;
  std::string unit_ = "image";
  int64_t tokens_per_example_ = 0;
  ProgressBar bar_;
  std::vector<runtime::SplitReplan> replans_;
  RunCurves curves_;
  std::vector<runtime::TraceEntry> profiled_;  // --profile's entries, when --trace takes them
  absl::Status step_status_;
};

}  // namespace tandem::tools
