#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/data/batch_loader.h"
#include "runtime/executor.h"
#include "runtime/lr_schedule.h"

namespace tandem::runtime {

/// Loss and accuracy of one pass over some batches.
struct PassResult {
  double loss = 0;      // mean per example
  double accuracy = 0;  // fraction correct
  int64_t examples = 0;
  int64_t steps = 0;
  double seconds = 0;
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
  int64_t correct = 0;          // correct predictions so far in the epoch
};

/// An epoch's steps done and their sums: what a checkpoint taken inside an epoch carries,
/// so that the resumed epoch ends with the same figures, bit for bit.
struct EpochProgress {
  int64_t steps = 0, examples = 0, correct = 0;
  double loss_sum = 0;
  double seconds = 0;
};

/// Runs a compiled classifier module (train_step(%x, %y) and eval_step(%x, %y) returning
/// loss and correct count, after the default pipeline) on an Executor. Owns nothing of the
/// data: batches come from a BatchLoader. How the module was built is not its business.
class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> create(std::unique_ptr<ir::Module> compiled,
                                                         ExecutorOptions options = {});

  /// Runs @init: parameters drawn on the first device and broadcast to all.
  absl::Status initialize();

  /// One training step on a batch (all `batch` rows are used; padding rows, label -1,
  /// count for nothing). Returns the batch's mean loss and its correct count.
  absl::StatusOr<std::pair<double, int64_t>> trainStep(const data::Batch& batch);

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

  /// OK when the loader's batches fit graph `name` (@train_step or @eval_step): as many
  /// rows as its inputs, each example of the shape of its images input ([N, C, H, W]: C, H
  /// and W), labels within the classes of its logits, and at least one example in the
  /// data. Else an error naming the data's file, what it holds and what the module takes.
  /// trainEpoch and evaluate check this before their first step; a caller may check first
  /// (before anything runs).
  absl::Status checkData(const data::BatchLoader& loader, absl::string_view name) const;

  /// The rows [first, end) of graph `name`'s batch that this process's devices take (its
  /// split's slices for them, which are contiguous: devices are numbered rank by rank),
  /// for BatchLoader::setRows; the whole batch in a one-process run.
  absl::StatusOr<std::pair<int64_t, int64_t>> rowsOfThisProcess(absl::string_view name) const;

  Executor& executor() { return *executor_; }
  const ir::TensorType& imageType() const { return image_type_; }
  const ir::TensorType& labelType() const { return label_type_; }

 private:
  std::unique_ptr<Executor> executor_;
  ExecutorOptions options_;
  /// Writes the fed variables of update `step` on every device of this process.
  absl::Status feedStep(int64_t step);
  /// Writes `value` to variable `name`'s replica on every device of this process.
  absl::Status writeOnThisProcess(const std::string& name, const HostTensor& value);

  std::function<void(const ir::Node&, size_t)> hook_;
  int64_t first_step_ = 0;
  std::optional<LrSchedule> schedule_;
  ir::TensorType image_type_, label_type_;
};

}  // namespace tandem::runtime
