#pragma once

// Tandem's public API: train a network written with the DSL (frontend/model.h: Builder,
// Tensor, ModelSpec) data-parallel on several devices in one call, evaluate it, save it
// and load it again. A program outside this tree gets it from the installed package:
//
//   find_package(Tandem CONFIG REQUIRED)
//   target_link_libraries(app PRIVATE Tandem::tandem)
//
//   #include "tandem/tandem.h"
//   auto model = tandem::train(spec, {.devices = "cpu:0,cpu:1", .batch = 256, .epochs = 10},
//                              tandem::Data::fashionMnist());
//
// A thin façade over the training library that `tandem train` runs too (train/: the same
// settings, checks, compiler pipeline, training session and checkpoint format), so a model
// trains here exactly as the CLI trains a zoo model with the same settings. Every mistake is
// an absl::Status naming the setting at fault in this API's words (`TrainConfig::batch: 1 is
// smaller than the device count 2; ...`), the data file, or the layer and source line of the
// model.

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "runtime/data/example_source.h"

namespace tandem {

/// Labelled examples a program holds for a classifier (classifierModel): `images`
/// row-major [count, C, H, W], one example of the shape of the model's image input after
/// another; `labels` one per example, in [0, ModelSpec::labels->classes).
struct Examples {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

/// A data set a program gives (PyTorch's map-style Dataset): its size, its fields (a name,
/// dtype and per-example shape each: the model's input of the same name takes it), and an
/// example by index as host bytes, read from the loader's threads. Implement it for data of
/// your own, or open one of Tandem's by spec (Data::fromSpec).
using Dataset = runtime::data::ExampleSource;
using DatasetField = runtime::data::Field;

/// What a model trains on and is evaluated on after every epoch: one of
/// - `spec` (and `test_spec` or `val_fraction`): data on disk, as `tandem train --data`
///   names it (docs/DATA.md): "npz:digits.npz", "images:/data/pets:size=64", ...;
/// - `fashion_mnist`: a directory holding Fashion-MNIST's four IDX files;
/// - `train_set` and `test_set`: data sets of the program's own;
/// - `train` and `test`: a classifier's examples held in memory.
struct Data {
  std::string spec;
  std::optional<std::string> test_spec;
  /// Evaluate on this fraction of `spec`'s examples (split off by the seed), train on the rest.
  std::optional<double> val_fraction;
  /// Transforms of the images x (`tandem train --augment`): "crop:4,flip,normalize:0.5/0.25".
  /// The random ones apply to the training examples only.
  std::string augment;
  std::string fashion_mnist;
  std::shared_ptr<const Dataset> train_set, test_set;
  Examples train, test;
  /// Only the first N training (test) examples; unset: all of them.
  std::optional<int64_t> limit_train, limit_test;

  /// Debian's dataset-fashion-mnist package puts the files here.
  static constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
  static Data fashionMnist(std::string dir = kFashionMnistDir) {
    return {.fashion_mnist = std::move(dir)};
  }
  static Data fromSpec(std::string spec, std::optional<std::string> test_spec = std::nullopt) {
    return {.spec = std::move(spec), .test_spec = std::move(test_spec)};
  }
  static Data fromDatasets(std::shared_ptr<const Dataset> train,
                           std::shared_ptr<const Dataset> test) {
    return {.train_set = std::move(train), .test_set = std::move(test)};
  }
  static Data fromExamples(Examples train, Examples test) {
    return {.train = std::move(train), .test = std::move(test)};
  }
};

/// How to train. Each setting is the `tandem train` flag of the same name (weight_decay
/// is --weight-decay) with its default and its range; unset hyper-parameters take the
/// model's (ModelSpec::defaults), or PyTorch's for an optimizer other than the model's.
struct TrainConfig {
  /// Devices, comma-separated: "cpu:0,cpu:1", "cuda:0,cuda:1" (`tandem devices` lists
  /// what this build has).
  std::string devices = "cpu:0";
  /// The global batch, split across the devices (evenly unless `split` gives weights).
  /// Unset: 256, halved down to 32 while an epoch would take fewer than 16 steps (as
  /// `tandem train`'s default).
  std::optional<int64_t> batch;
  int epochs = 10;
  /// Train for this many steps instead of `epochs` (token data: "tokens:", "text:" specs,
  /// whose examples are random windows), evaluating every `eval_every` steps (unset: 250,
  /// or at the end of a shorter run), which divides `steps`; each period is an epoch of
  /// the history.
  std::optional<int64_t> steps, eval_every;
  /// Seeds the initial values and the order of the examples.
  uint64_t seed = 0;
  /// "sgd" or "adamw"; unset: the model's.
  std::optional<std::string> optimizer;
  std::optional<double> lr, momentum, weight_decay, beta1, beta2, eps;
  /// "constant", "cosine" or "step:EPOCHS:GAMMA", after `warmup` steps of linear warmup.
  std::optional<std::string> schedule;
  std::optional<int64_t> warmup;
  /// Clip the gradients' global norm to this; unset: no clipping.
  std::optional<double> clip_grad_norm;
  /// The training loss's label smoothing, in [0, 1).
  std::optional<double> label_smoothing;
  /// "f32", or "bf16" (mixed precision: activations in bf16, f32 master weights).
  std::string precision = "f32";
  /// The dtype gradients are all-reduced in: "f32" or "bf16".
  std::string allreduce_dtype = "f32";
  /// Batch-norm statistics over the whole batch rather than each device's share.
  bool sync_bn = false;
  /// "even", a weight per device such as "3,1", or "auto" (start even, then re-plan from
  /// the devices' measured speeds).
  std::string split = "even";
  /// CPU threads each CPU device's kernels use.
  int threads_per_device = 1;
  /// Write a checkpoint into this directory after every epoch (Model::load continues it;
  /// the directory must not hold one already), and every `checkpoint_every` steps.
  std::optional<std::string> checkpoint;
  std::optional<int64_t> checkpoint_every;
  /// Go on when the loss turns NaN or infinite; else fit stops at that step with an error
  /// that names the first variable holding one and what to change.
  bool allow_nonfinite = false;
};

/// The name before issue 41.
using TrainOptions = TrainConfig;

/// How Model::generate draws (nanoGPT's sample.py's settings).
struct GenerateConfig {
  int64_t tokens = 100;
  /// Divides the logits (> 0): below 1 surer, above 1 more varied.
  double temperature = 1.0;
  /// > 0: only the k most likely tokens are drawn from.
  int64_t top_k = 0;
  uint64_t seed = 0;
  /// The device the one-token step runs on.
  std::string device = "cpu:0";
};

/// After each training step.
struct StepMetrics {
  int epoch = 0;
  int64_t step = 0, steps = 0;  // steps done in the epoch, and the epoch's steps
  int64_t examples = 0;         // trained so far in the epoch
  double loss = 0;              // this step's mean loss
  double mean_loss = 0;         // over the epoch so far
  double seconds = 0;           // since the epoch started
};

/// After each epoch: its training figures and the evaluation on the test data.
struct EpochMetrics {
  int epoch = 0;
  double train_loss = 0, train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0, images_per_second = 0;
  /// Every metric of the model (ModelSpec::metrics, in its order; accuracy among them for
  /// a classifier) over the epoch's training and test passes, as Metrics::metrics.
  std::vector<std::pair<std::string, double>> train_metrics, test_metrics;
};

/// An evaluation: mean loss and accuracy over every example, and every metric of the
/// model (ModelSpec::metrics, each its sum over the examples divided by their count).
struct Metrics {
  double loss = 0, accuracy = 0;
  int64_t examples = 0;
  double seconds = 0;
  std::vector<std::pair<std::string, double>> metrics;
};

/// A checkpoint written into TrainConfig::checkpoint: after each epoch, every
/// TrainConfig::checkpoint_every steps, or where a stop left the run.
struct CheckpointWritten {
  /// Where Model::load of it goes on: epoch `epoch` after `steps` of its steps (0 for the
  /// checkpoint after epoch - 1 finished).
  int epoch = 0;
  int64_t steps = 0;
  std::string dir;
};

struct Callbacks {
  /// After every training step; false stops training there, without evaluating the epoch.
  std::function<bool(const StepMetrics&)> on_step;
  /// After every epoch's evaluation; false stops after this epoch.
  std::function<bool(const EpochMetrics&)> on_epoch;
  /// After every checkpoint written (Keras' ModelCheckpoint callback, as an event).
  std::function<void(const CheckpointWritten&)> on_checkpoint;
};

/// A trained parameter's value on the host (Model::weights and Model::setWeights, as
/// Keras's get_weights and set_weights): its variable's name (a layer's scope path and
/// ".w" or ".b": "fc1.w"), dtype and shape (a linear layer's weight is [out, in], as
/// PyTorch's), and its elements, row-major, as bytes.
struct Weight {
  std::string name;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;
  std::string bytes;

  /// The elements of an f32 weight (empty for another dtype).
  std::vector<float> f32() const {
    std::vector<float> values;
    if (dtype != ir::DType::kF32) return values;
    values.resize(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    return values;
  }
  /// An f32 weight holding `values`.
  static Weight ofF32(std::string name, std::vector<int64_t> shape,
                      const std::vector<float>& values) {
    Weight w{.name = std::move(name), .dtype = ir::DType::kF32, .shape = std::move(shape)};
    w.bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    return w;
  }
};

/// Host values of many examples, row-major, the examples first: a model's input or output
/// in Model::predict. An f32 array fills `f32`, an i32 array (token ids, class ids) `i32`;
/// the other stays empty.
struct Array {
  std::vector<int64_t> shape;  // [count, one example's shape...]
  std::vector<float> f32;
  std::vector<int32_t> i32;  // an i32 input's values, or an i64 one's (widened)

  static Array floats(std::vector<int64_t> shape, std::vector<float> values) {
    return {.shape = std::move(shape), .f32 = std::move(values)};
  }
  static Array ints(std::vector<int64_t> shape, std::vector<int32_t> values) {
    return {.shape = std::move(shape), .i32 = std::move(values)};
  }
};

/// Arrays by name: a prediction's inputs (ModelSpec::predict's) and its outputs.
using Arrays = std::map<std::string, Array>;

/// A model compiled for its devices, its variables on them, and the data it trains on.
class Model {
 public:
  /// Checks the settings and the data, compiles `spec` (autodiff, the optimizer, the
  /// split across devices, gradient all-reduces, ...) and loads it onto its devices with
  /// freshly drawn parameters. Nothing is trained yet.
  static absl::StatusOr<Model> create(const ModelSpec& spec, const TrainConfig& config,
                                      const Data& data);
  /// As create, then the variables, position and figures of the checkpoint in `dir`
  /// (written by save or TrainConfig::checkpoint): fit goes on from where it stopped.
  /// The checkpoint must be of this model with the settings that change what a step
  /// computes (batch, seed, optimizer and its values, schedule, precision, ...); the
  /// devices may differ.
  static absl::StatusOr<Model> load(const ModelSpec& spec, const TrainConfig& config,
                                    const Data& data, const std::string& dir);

  /// Trains the epochs left up to TrainConfig::epochs, evaluating on the test data after
  /// each; returns every finished epoch's figures (a loaded checkpoint's too). A loss that
  /// turns NaN or infinite stops it with an error (unless TrainConfig::allow_nonfinite).
  absl::StatusOr<std::vector<EpochMetrics>> fit(const Callbacks& callbacks = {});
  /// Loss and metrics over the test data, over `examples`, or over a data set.
  absl::StatusOr<Metrics> evaluate();
  absl::StatusOr<Metrics> evaluate(const Examples& examples);
  absl::StatusOr<Metrics> evaluate(const Dataset& data);
  /// The model's prediction (ModelSpec::predict: a classifier's "logits" [count, classes]
  /// from its images "x" [count, C, H, W]) over any number of examples, with its weights as
  /// they stand: forward only, in inference mode (batch norm on its running statistics, no
  /// dropout), batches of TrainConfig::batch split across TrainConfig::devices, the last
  /// one padded; each output has one row per example, in their order. `inputs` gives each
  /// of the prediction's inputs (other inputs of the model, such as a classifier's labels,
  /// are ignored). The forward module is compiled on the first call (only the variables it
  /// reads, copied from the first device before every call). `on_batch(done, batches)` is
  /// called after every batch; false stops there, the outputs holding the examples done.
  /// Errors name the input at fault and what the model takes.
  absl::StatusOr<Arrays> predict(
      const Arrays& inputs, const std::function<bool(int64_t, int64_t)>& on_batch = nullptr);
  /// Writes a checkpoint of the model as it stands into `dir` (created if missing;
  /// `replace` overwrites one that is there, else that is an error).
  absl::Status save(const std::string& dir, bool replace = false);

  /// A language model's text (ModelSpec::decode, zoo::gpt): feeds `prompt` (token ids, at
  /// least one) and draws `config.tokens` more from its current weights, one a step over
  /// a KV cache, calling `on_token` with each as it is drawn (false stops). The same seed
  /// draws the same tokens. `tandem generate` is the same with a checkpoint.
  absl::StatusOr<std::vector<int32_t>> generate(const std::vector<int32_t>& prompt,
                                                const GenerateConfig& config,
                                                const std::function<bool(int32_t)>& on_token = {});

  /// Every finished epoch's figures, and the next epoch fit trains.
  const std::vector<EpochMetrics>& history() const;
  int nextEpoch() const;
  /// The compiled training step as textual IR (docs/IR.md): what runs on each device.
  std::string trainStepText() const;

  /// Every trained parameter, in the model's order, as it stands (after create: the
  /// initial values; after fit: the trained ones). Read from the first device: every
  /// device holds the same values (the initial ones are broadcast, and each step applies
  /// the same all-reduced update). Buffers (batch-norm statistics) and the optimizer's
  /// state are not parameters and are not included.
  absl::StatusOr<std::vector<Weight>> weights() const;
  /// Overwrites the parameters that `weights` names (any of them, each once) on every
  /// device; the others, and the optimizer's state, stay as they are. Checked before
  /// anything is written: an error names the weight that is not a parameter of the model,
  /// is given twice, or differs from the parameter in dtype, shape or byte count.
  absl::Status setWeights(const std::vector<Weight>& weights);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  struct Impl;  // tandem.cc's: opaque here

 private:
  // Only create and load make a Model.
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Model::create, then fit: the trained model, or the first error.
absl::StatusOr<Model> train(const ModelSpec& spec, const TrainConfig& config, const Data& data,
                            const Callbacks& callbacks = {});

}  // namespace tandem
