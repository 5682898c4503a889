#pragma once

// Runs a compiled prediction module (ir/predict_graph.h: @predict_step, split across the
// devices, each device's rows of the outputs left on it) over a source of examples: the
// source's batches in order, the last one padded, and every device's rows gathered in
// device order into one host array per output, [count, ...], the padding dropped.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/example_source.h"
#include "runtime/executor.h"
#include "runtime/host_tensor.h"

namespace tandem::runtime {

/// One output of a prediction over a source: its name and its rows, one per example.
struct PredictedOutput {
  std::string name;
  HostTensor value;  // [count, ...]
};

class Predictor {
 public:
  /// Loads `compiled` (compilePrediction's; one process: every device is this one's).
  /// `outputs` names @predict_step's outputs per device, in order (PredictSpec::outputs).
  /// The variables hold zeros until setVariable writes them.
  static absl::StatusOr<std::unique_ptr<Predictor>> create(std::unique_ptr<ir::Module> compiled,
                                                           std::vector<std::string> outputs,
                                                           ExecutorOptions options = {});

  /// Writes `value` into variable `name` on every device (the same values everywhere: a
  /// prediction of an example does not depend on the device it lands on).
  absl::Status setVariable(const std::string& name, const HostTensor& value);

  /// OK when `data` feeds every input of @predict_step: a field of its name, dtype and
  /// per-example shape, and at least one example. Else an error naming `data.where()` (or
  /// `what`, when given), what it holds and what the model takes.
  absl::Status checkData(const data::ExampleSource& data, const std::string& what = "") const;

  /// Called after every batch with the batch (its fields in the source's order; rows
  /// [0, valid) are examples) and the batches in all; false stops after that batch, and
  /// the outputs hold the examples predicted so far.
  using BatchCallback = std::function<bool(const data::Batch& batch, int64_t batches)>;
  /// The outputs over every example of `data`, in its order.
  absl::StatusOr<std::vector<PredictedOutput>> predict(const data::ExampleSource& data,
                                                       const BatchCallback& on_batch = nullptr);

  /// One run of @predict_step on `inputs` (host tensors of its inputs' types, in order):
  /// its outputs, each device's in turn. For a step with state between runs (generation's
  /// caches), where the loader's batches of a data set do not fit.
  absl::StatusOr<std::vector<HostTensor>> run(absl::Span<const HostTensor> inputs);

  const ir::Module& module() const { return executor_->module(); }
  int64_t batch() const { return batch_; }
  const std::vector<std::string>& outputNames() const { return outputs_; }

 private:
  Predictor() = default;

  std::unique_ptr<Executor> executor_;
  std::vector<std::string> outputs_;
  std::vector<ir::TensorType> input_types_;  // @predict_step's, batch first
  int64_t batch_ = 0;
};

}  // namespace tandem::runtime
