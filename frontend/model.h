#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/builder.h"
#include "ir/ir.h"
#include "ir/optimizer_configs.h"

namespace tandem {

/// Settings that train a model well in about 10 epochs; what `tandem train` and
/// `tandem dump` use where a flag is not given. The lessons' settings stay a flag away.
struct TrainingDefaults {
  /// The optimizer and its values (a struct per optimizer op of ir/ops.td, its fields the
  /// op's hyper-parameters, each defaulting to the op's preset: PyTorch's).
  ir::OptimizerConfig optimizer = ir::SgdConfig{};
  /// The global batch when none is given (nanoGPT's 64 sequences); unset: 256, or less
  /// for small data.
  std::optional<int64_t> batch;
  /// --schedule and --warmup, the warmup in epochs (the CLI turns it into steps), or in
  /// steps (a language model's, trained by steps).
  std::string schedule = "constant";
  int64_t warmup_epochs = 0;
  std::optional<int64_t> warmup_steps;
  /// --clip-grad-norm: the gradients' global norm is clipped at it; unset: not clipped.
  std::optional<double> clip_grad_norm;
  /// Weight decay only on the matrices (the weights that linear, conv2d and matmul read,
  /// not on biases, normalization parameters or embedding tables), as nanoGPT's and
  /// timm's parameter groups do; false: on every trained variable (torch.optim's default).
  bool decay_matrices_only = false;
  ir::Initializer weight_init{ir::Initializer::Kind::kKaiming};
  /// --label-smoothing: the training loss's (BuildOptions::label_smoothing).
  double label_smoothing = 0;
};

/// One input of a model: the data's field of the same name feeds it. `shape` is one
/// example's (the step's input has the batch axis first). An i64 input (int64 ids or
/// labels) is i64 in the graph, split across devices by bytes like any input, and reaches
/// the step as i32 (a cast at the graph's start: the index ops take i32).
struct ModelInput {
  std::string name;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;
};

/// A model's inputs as its step sees them, batch first, by name.
class StepInputs {
 public:
  /// `reader` names what reads them in errors: "its step", "its prediction".
  StepInputs(Builder& b, std::vector<std::pair<std::string, Tensor>> inputs,
             std::string reader = "its step")
      : b_(b), inputs_(std::move(inputs)), reader_(std::move(reader)) {}
  /// The input named `name`. Another name is the build's error (naming the inputs there
  /// are) and an empty handle, which the layers reading it pass on.
  Tensor operator[](absl::string_view name) const;

 private:
  Builder& b_;
  std::vector<std::pair<std::string, Tensor>> inputs_;
  std::string reader_;
};

/// A figure a pass over the data reports: `sum` (a scalar, f32 or i32) is summed over
/// the examples of every step and device, and the pass reports it divided by the examples
/// (an accuracy: the correct count).
struct Metric {
  std::string name;
  Tensor sum;
};

/// What a model's step returns.
struct StepOutputs {
  /// A scalar f32 (rank 0, or [1]). In the training step the mean over the global batch (the loss
  /// layers divide by the global count, so that the devices' parts add up to it exactly);
  /// in the evaluation step (Builder::training() false) the sum over the batch's examples.
  Tensor loss;
  std::vector<Metric> metrics;
};

/// A classifier's labels: its input `input` holds class ids in [0, classes), which the
/// data is checked against before anything runs.
struct ClassLabels {
  std::string input;
  int64_t classes = 0;
};

/// One output of a prediction: a tensor of one row per example ([N, ...], batch first).
struct Prediction {
  std::string name;
  Tensor value;
};

/// What a model predicts, forward only: per-example outputs (a classifier's logits) from
/// some of its inputs (its images, not its labels). Built with Builder::training() false
/// (batch norm on its running statistics, no dropout) over the variables the step trains.
struct PredictSpec {
  /// The inputs a prediction reads, by name: some of ModelSpec::inputs, in any order (the
  /// prediction's inputs come in this order).
  std::vector<std::string> inputs;
  /// The names of the outputs `forward` returns, in order (declared, as the metrics are).
  std::vector<std::string> outputs;
  /// Builds the outputs on a batch of those inputs: each a tensor of the batch's rows
  /// first, an f32 or i32 [N, ...] of any rank >= 1.
  std::function<std::vector<Prediction>(Builder&, const StepInputs&)> forward;
};

/// A language model's step for generation with a KV cache: the logits [N, 1, vocab] of one
/// new token per row at `position` (i32 [N]), each layer's keys and values written into
/// cache variables of `context` rows (Builder::kvWrite) and attended to there
/// (Builder::cachedAttention), so that no prefix is computed again. Built in inference mode
/// over the variables the training step trains, with the same names.
struct DecodeSpec {
  int64_t context = 0;
  std::function<Tensor(Builder&, Tensor token, Tensor position)> step;
};

/// A model written with the DSL: named inputs in, a loss and named metrics out.
struct ModelSpec {
  std::string name;
  std::vector<ModelInput> inputs;
  /// The names of the metrics its step returns, in order (declared, like the inputs, so
  /// that what a run reports is known before anything is built).
  std::vector<std::string> metrics;
  /// Set for a classifier (classifierModel).
  std::optional<ClassLabels> labels;
  TrainingDefaults defaults;
  /// Builds the step on a batch of inputs. Called once for the training step and once for
  /// the evaluation step, over one set of variables.
  std::function<StepOutputs(Builder&, const StepInputs&)> step;
  /// Set for a model that predicts (classifierModel: "logits" from "x"); unset, the model
  /// trains and evaluates but has no prediction.
  std::optional<PredictSpec> predict;
  /// What the model is made for and its size, as (key, value) text where its variables'
  /// shapes do not say it (a GPT's heads, its vocabulary and context): saved in every
  /// checkpoint as "model.KEY", compared when a run resumes, and read back by whatever
  /// rebuilds the model from a checkpoint (zoo::modelOfCheckpoint: export, predict).
  std::vector<std::pair<std::string, std::string>> made_for;
  /// Set for a language model that generates (zoo::gpt): its one-token step.
  std::optional<DecodeSpec> decode;
};

/// The logits of a classifier for a batch of images [N, C, H, W]: [N, classes].
using ClassifierForward = std::function<Tensor(Builder&, Tensor images)>;

/// A classifier as a model: input `x` (f32 images of `image_shape`, [C,H,W]) and `y` (i32
/// class ids in [0, classes); negative ones, the padding of a last batch, count for
/// nothing), the softmax cross-entropy of the logits `forward` returns ([N, classes]) as
/// its loss (with BuildOptions::label_smoothing in training), and metric `accuracy`; it
/// predicts `logits` ([N, classes], the forward's) from `x` alone.
ModelSpec classifierModel(std::string name, std::vector<int64_t> image_shape, int64_t classes,
                          ClassifierForward forward, TrainingDefaults defaults = {});

/// The model that runs `spec`'s one-token decoding step as a prediction: inputs `token`
/// (i32 [1] per row) and `position` (i32, one per row), output `logits` [1, vocab] per
/// row; its prediction module (buildPredictModule) holds the trained variables it reads
/// and the caches. An error when `spec` has no DecodeSpec.
absl::StatusOr<ModelSpec> decodingModel(const ModelSpec& spec);

/// The largest global batch a module can be built for (shapes stay far from overflow).
constexpr int64_t kMaxBatch = int64_t{1} << 31;

}  // namespace tandem
