#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/data/batch_loader.h"
#include "runtime/executor.h"
#include "runtime/lr_schedule.h"

namespace tandem::runtime {

/// A model's metric over a pass: its sum over the examples, divided by them.
struct MetricValue {
  std::string name;
  double value = 0;
  bool operator==(const MetricValue&) const = default;
};

/// Loss and metrics of one pass over some batches.
struct PassResult {
  double loss = 0;  // mean per example
  /// Every metric the step returns, in its order, each per example.
  std::vector<MetricValue> metrics;
  double accuracy = 0;  // a classifier's metric `accuracy` (fraction correct); 0 for others
  int64_t examples = 0;
  int64_t steps = 0;
  double seconds = 0;
  /// Of `seconds`, the time the host waited for the loader's next batch (a training pass):
  /// near 0 when the loader keeps ahead of the steps (--profile reports it).
  double input_wait_seconds = 0;
  bool stopped = false;  // the callback asked to stop before the loader ran out
};

/// What a training epoch reports after each step.
struct StepReport {
  int64_t step = 0, steps = 0;  // steps done, and in the epoch
  int64_t examples = 0;         // images trained so far in the epoch
  double seconds = 0;           // since the epoch started
  double loss = 0;              // this step's mean loss
  double mean_loss = 0;         // over the epoch so far
  double loss_sum = 0;          // the epoch's summed loss so far (what mean_loss divides)
  int64_t correct = 0;          // a classifier's correct predictions so far in the epoch
};

/// What one step returns: its loss (a mean over the global batch) and each metric's sum
/// over the batch, in the step's order.
struct StepResult {
  double loss = 0;
  std::vector<double> metric_sums;
};

/// An epoch's steps done and their sums: what a checkpoint taken inside an epoch carries,
/// so that the resumed epoch ends with the same figures, bit for bit.
struct EpochProgress {
  int64_t steps = 0, examples = 0, correct = 0;
  double loss_sum = 0;
  double seconds = 0;
};

/// Runs a compiled module (train_step and eval_step of the same inputs, returning the loss
/// and then one sum per metric, after the default pipeline; frontend/model.h's contract) on
/// an Executor. Owns nothing of the data: batches come from a BatchLoader, whose fields feed
/// the inputs of the same names. How the module was built is not its business.
class Trainer {
 public:
  /// `metrics` names the step's returned values after the loss, in order (ModelSpec's
  /// metrics; `accuracy` is a classifier's correct count).
  static absl::StatusOr<std::unique_ptr<Trainer>> create(std::unique_ptr<ir::Module> compiled,
                                                         std::vector<std::string> metrics,
                                                         ExecutorOptions options = {});

  /// Runs @init: parameters drawn on the first device and broadcast to all.
  absl::Status initialize();

  /// One training step on a batch whose fields are @train_step's inputs in their order (all
  /// `batch` rows are used; padding rows, label -1, count for nothing).
  absl::StatusOr<StepResult> trainStep(const data::Batch& batch);

  /// Called after every step; returning false ends the epoch there.
  using StepCallback = std::function<bool(const StepReport&)>;
  /// One epoch of `loader` (already started).
  absl::StatusOr<PassResult> trainEpoch(data::BatchLoader& loader,
                                        const StepCallback& on_step = nullptr) {
    return trainEpoch(loader, EpochProgress{}, on_step);
  }
  /// The rest of an epoch: `from` is the part done before (a resumed checkpoint's), and
  /// the loader must have been started at its step. Steps and sums go on from it.
  absl::StatusOr<PassResult> trainEpoch(data::BatchLoader& loader, const EpochProgress& from,
                                        const StepCallback& on_step = nullptr);

  /// Loss and accuracy over every example the loader hands out (eval_step, split across
  /// the devices; padding of the last batch is ignored). `keep_going` is asked after
  /// every batch; false stops the evaluation there.
  absl::StatusOr<PassResult> evaluate(data::BatchLoader& loader,
                                      const std::function<bool()>& keep_going = nullptr);

  /// Runs `compiled` from now on, a recompilation of the same model (another split of the
  /// batch, say): every variable's replica on every device (parameters, optimizer state,
  /// running statistics) is carried over, and the before-node hook set through this
  /// Trainer with it.
  absl::Status replaceModule(std::unique_ptr<ir::Module> compiled);

  /// The index in the whole run of the epoch's first update (the epochs before it times
  /// the steps per epoch), for the next trainEpoch, which counts on from
  /// it (a resumed epoch's steps done included) for the variables it feeds before each update (role `fed`, ir/ir.h): @lr_scale,
  /// the schedule's factor, when a schedule is set, and @step, the update's index, when
  /// the module has it (dropout's masks draw from it).
  void setFirstStep(int64_t step) { first_step_ = step; }
  /// The learning-rate schedule; unset (the default): @lr_scale is not written.
  void setLearningRateSchedule(std::optional<LrSchedule> schedule) {
    schedule_ = std::move(schedule);
  }

  /// Executor::setBeforeNodeHook, kept across replaceModule.
  void setBeforeNodeHook(std::function<void(const ir::Node&, size_t device)> hook);

  /// OK when the loader's batches fit graph `name` (@train_step or @eval_step): a field of
  /// each input's name, dtype and per-example shape, as many rows as the inputs, a
  /// classifier's labels within the classes of its logits, and at least one example in the
  /// data. Else an error naming the data, what it holds and what the module takes.
  /// trainEpoch and evaluate check this before their first step; a caller may check first
  /// (before anything runs).
  absl::Status checkData(const data::BatchLoader& loader, absl::string_view name) const;

  /// The rows [first, end) of graph `name`'s batch that this process's devices take (its
  /// split's slices for them, which are contiguous: devices are numbered rank by rank),
  /// for BatchLoader::setRows; the whole batch in a one-process run.
  absl::StatusOr<std::pair<int64_t, int64_t>> rowsOfThisProcess(absl::string_view name) const;

  Executor& executor() { return *executor_; }
  /// The global batch of the compiled step (its inputs' first axis).
  int64_t batch() const { return batch_; }
  /// The step's inputs' types (batch first), in order.
  const std::vector<ir::TensorType>& inputTypes() const { return input_types_; }
  const std::vector<std::string>& metricNames() const { return metrics_; }

 private:
  std::unique_ptr<Executor> executor_;
  ExecutorOptions options_;
  /// Writes the fed variables of update `step` on every device of this process.
  absl::Status feedStep(int64_t step);
  /// Writes `value` to variable `name`'s replica on every device of this process.
  absl::Status writeOnThisProcess(const std::string& name, const HostTensor& value);

  /// Which field of the loader's batches feeds each input of graph `name` (checked by
  /// checkData first).
  std::vector<size_t> fieldsOfInputs(const data::BatchLoader& loader, absl::string_view name) const;
  /// Hands `batch` to graph `name`'s next launch, its fields picked by `fields`.
  absl::Status handOver(absl::string_view name, const data::Batch& batch,
                        const std::vector<size_t>& fields);
  /// Reads the inputs' types and the batch from the module's @train_step.
  void readSignature();
  /// The accuracy (`accuracy`'s sums over the examples) and every metric of a pass.
  void finish(PassResult& r, double loss_sum, const std::vector<double>& metric_sums) const;

  std::function<void(const ir::Node&, size_t)> hook_;
  int64_t first_step_ = 0;
  std::optional<LrSchedule> schedule_;
  std::vector<ir::TensorType> input_types_;
  int64_t batch_ = 0;
  std::vector<std::string> metrics_;
  int accuracy_ = -1;  // the index of metric `accuracy`, -1 when none
};

}  // namespace tandem::runtime
