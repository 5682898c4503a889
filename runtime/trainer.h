#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "ir/types.h"
#include "runtime/data/batch_loader.h"
#include "runtime/executor.h"

namespace tandem::runtime {

/// Hyper-parameters and set-up of a data-parallel training run.
struct TrainOptions {
  std::vector<ir::Device> devices{{ir::DeviceKind::kCpu, 0}};
  int64_t batch = 256;          // global: split across the devices
  std::vector<double> weights;  // per-device share of the batch; empty: even
  double lr = 0.1, momentum = 0, weight_decay = 0;
  ir::Initializer weight_init{ir::Initializer::Kind::kKaiming};
  uint64_t seed = 0;
  int threads_per_device = 1;
  double bucket_mb = 25, first_bucket_mb = 1;
  bool trace = false;  // ExecutorOptions::trace
};

/// What `tandem train` uses when a flag is not given: settings that train the model well
/// in 10 epochs. The lessons' settings stay reachable through the flags.
struct ModelDefaults {
  double lr, momentum, weight_decay;
  ir::Initializer weight_init;
};
ModelDefaults defaultsFor(absl::string_view model);

/// Loss and accuracy of one pass over some batches.
struct PassResult {
  double loss = 0;      // mean per example
  double accuracy = 0;  // fraction correct
  int64_t examples = 0;
  double seconds = 0;
};

/// Compiles a model for data-parallel training (the default pipeline) and runs its steps
/// on an Executor. Owns nothing of the data: batches come from a BatchLoader.
class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> create(const ModelSpec& spec,
                                                         const TrainOptions& options);

  /// Runs @init: parameters drawn on the first device and broadcast to all.
  absl::Status initialize();

  /// One training step on a batch (all `batch` rows are used; padding rows, label -1,
  /// count for nothing). Returns the batch's mean loss and its correct count.
  absl::StatusOr<std::pair<double, int64_t>> trainStep(const data::Batch& batch);

  /// One epoch of `loader` (already started). `on_step(done, total, images_per_s)` is
  /// called after every step; `stop` (Ctrl-C) ends the epoch after the current step.
  absl::StatusOr<PassResult> trainEpoch(
      data::BatchLoader& loader,
      const std::function<void(int64_t, int64_t, double, double)>& on_step = nullptr,
      const std::atomic<bool>* stop = nullptr);

  /// Loss and accuracy over every example the loader hands out (eval_step, split across
  /// the devices; padding of the last batch is ignored).
  absl::StatusOr<PassResult> evaluate(data::BatchLoader& loader);

  Executor& executor() { return *executor_; }
  const ir::TensorType& imageType() const { return image_type_; }
  const ir::TensorType& labelType() const { return label_type_; }

 private:
  std::unique_ptr<Executor> executor_;
  ir::TensorType image_type_, label_type_;
};

}  // namespace tandem::runtime
