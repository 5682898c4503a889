#include "frontend/model.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/build_module.h"
#include "frontend/builder_internals.h"
#include "ir/op_views.h"
#include "ir/predict_graph.h"
#include "ir/status_macros.h"

namespace tandem {

using ir::Op;
using ir::TensorType;

namespace {

std::string inputNames(const std::vector<std::pair<std::string, Tensor>>& inputs) {
  return absl::StrJoin(inputs, ", ",
                       [](std::string* out, const auto& in) { out->append(in.first); });
}

// A step's returned value must be a scalar; `what` names it for the error.
absl::Status checkScalar(const ModelSpec& spec, const Tensor& t, const std::string& what,
                         std::initializer_list<ir::DType> dtypes) {
  if (!t.valid())
    return absl::InvalidArgumentError(
        absl::StrCat("model ", spec.name, ": its step returned no ", what));
  const TensorType& type = t.value()->type();
  // A scalar is one element: rank 0 (the loss layers') or [1].
  if ((type.shape != ir::Shape{} && type.shape != ir::Shape{1}) ||
      std::find(dtypes.begin(), dtypes.end(), type.dtype) == dtypes.end())
    return absl::InvalidArgumentError(absl::StrCat("model ", spec.name, ": its ", what, " is ",
                                                   ir::toString(type), ", not a scalar (",
                                                   ir::dtypeName(*dtypes.begin()), "[])"));
  return absl::OkStatus();
}

/// Graph input `in` of `batch` examples as the step reads it: an i64 input (NumPy's and
/// PyTorch's int64 ids and labels) is cast to the i32 the index ops take, at the graph's
/// start; the runtime checks, as each batch is handed over, that the values an index op
/// reads fit (runtime/label_check.h), so the cast never changes one.
Tensor stepInput(Builder& b, const ModelInput& in, int64_t batch) {
  ir::Shape shape{batch};
  shape.insert(shape.end(), in.shape.begin(), in.shape.end());
  Tensor t = BuilderInternals::addInput(b, in.name, TensorType{in.dtype, shape});
  if (in.dtype != ir::DType::kI64 || !t.valid()) return t;
  return BuilderInternals::addNode(b,
                                   ir::CastArgs{.x = t.value(), .dtype = ir::CastType::kI32}.spec(),
                                   in.name + "_i32", std::source_location::current());
}

/// One step graph: the model's inputs, its step, then the loss and the metrics returned.
absl::Status buildStep(const ModelSpec& spec, Builder& b, ir::Graph* g, bool training,
                       int64_t batch) {
  BuilderInternals::beginGraph(b, g, training);
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const ModelInput& in : spec.inputs) inputs.emplace_back(in.name, stepInput(b, in, batch));
  const StepOutputs out = spec.step(b, StepInputs(b, std::move(inputs)));
  if (!b.status().ok()) return b.status();
  RETURN_IF_ERROR(checkScalar(spec, out.loss, "loss", {ir::DType::kF32}));
  std::vector<ir::Value*> returned{out.loss.value()};
  const auto name = [](std::string* text, const Metric& m) { text->append(m.name); };
  if (out.metrics.size() != spec.metrics.size() ||
      !std::equal(out.metrics.begin(), out.metrics.end(), spec.metrics.begin(),
                  [](const Metric& m, const std::string& declared) { return m.name == declared; }))
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.name, ": its step returns metrics (", absl::StrJoin(out.metrics, ", ", name),
        ") but it declares (", absl::StrJoin(spec.metrics, ", "), ")"));
  for (const Metric& metric : out.metrics) {
    RETURN_IF_ERROR(checkScalar(spec, metric.sum, absl::StrCat("metric '", metric.name, "'"),
                                {ir::DType::kF32, ir::DType::kI32}));
    returned.push_back(metric.sum.value());
  }
  g->setOutputs(std::move(returned));
  return absl::OkStatus();
}

// The classifier's logits of images `x`, checked to be [batch, classes]; an empty handle
// (the builder's error set) when they are not.
Tensor classifierLogits(int64_t classes, const ClassifierForward& forward, Builder& b, Tensor x) {
  if (!x.valid()) return {};
  const int64_t batch = x.dim(0);
  Tensor logits = forward(b, x);
  if (!b.status().ok()) return {};
  if (!logits.valid()) {
    b.fail(absl::InvalidArgumentError("forward returned an empty tensor handle"));
    return {};
  }
  if (ir::Shape want{batch, classes}; logits.shape() != want) {
    b.fail(absl::InvalidArgumentError(
        absl::StrCat("forward returns ", ir::toString(logits.value()->type()),
                     " but the logits must be [", absl::StrJoin(want, ","), "] (batch, classes)")));
    return {};
  }
  return logits;
}

// The classifier's step: the loss of its logits against the labels, and their accuracy.
StepOutputs classifierStep(int64_t classes, const ClassifierForward& forward, Builder& b,
                           const StepInputs& inputs) {
  Tensor x = inputs["x"], y = inputs["y"];
  if (!x.valid() || !y.valid()) return {};
  Tensor logits = classifierLogits(classes, forward, b, x);
  if (!logits.valid()) return {};
  // Training divides the summed loss by the global batch (crossEntropy's mean), which stays
  // global when replicate gives each device a slice and keeps uneven splits exact; the
  // evaluation sums, and the pass divides by the examples it saw.
  const bool training = b.training();
  Tensor loss = b.crossEntropy(logits, y,
                               {.reduction = training ? ir::Reduction::kMean : ir::Reduction::kSum,
                                .label_smoothing = training ? b.options().label_smoothing : 0.0});
  Tensor correct = BuilderInternals::addNode(
      b, ir::AccuracyArgs{.logits = logits.value(), .labels = y.value()}.spec(), "correct",
      std::source_location::current());
  return {.loss = loss, .metrics = {{.name = "accuracy", .sum = correct}}};
}

}  // namespace

Tensor StepInputs::operator[](absl::string_view name) const {
  for (const auto& [input, tensor] : inputs_)
    if (input == name) return tensor;
  b_.fail(absl::InvalidArgumentError(absl::StrCat(reader_, " reads input '", name,
                                                  "', which is not among its inputs (",
                                                  inputNames(inputs_), ")")));
  return Tensor();
}

ModelSpec classifierModel(std::string name, std::vector<int64_t> image_shape, int64_t classes,
                          ClassifierForward forward, TrainingDefaults defaults) {
  ModelSpec spec{.name = std::move(name),
                 .inputs = {{.name = "x", .dtype = ir::DType::kF32, .shape = image_shape},
                            {.name = "y", .dtype = ir::DType::kI32, .shape = {}}},
                 .metrics = {"accuracy"},
                 .labels = ClassLabels{.input = "y", .classes = classes},
                 .defaults = std::move(defaults)};
  spec.predict = PredictSpec{
      .inputs = {"x"},
      .outputs = {"logits"},
      .forward = [classes, forward](Builder& b, const StepInputs& inputs) {
        return std::vector<Prediction>{
            {.name = "logits", .value = classifierLogits(classes, forward, b, inputs["x"])}};
      }};
  spec.step = [classes, forward = std::move(forward)](Builder& b, const StepInputs& inputs) {
    return classifierStep(classes, forward, b, inputs);
  };
  return spec;
}

absl::StatusOr<ModelSpec> decodingModel(const ModelSpec& spec) {
  if (!spec.decode)
    return absl::InvalidArgumentError(
        absl::StrCat("model ", spec.name, " declares no decoding step: it does not generate"));
  ModelSpec d{.name = spec.name,
              .inputs = {{.name = "token", .dtype = ir::DType::kI32, .shape = {1}},
                         {.name = "position", .dtype = ir::DType::kI32, .shape = {}}},
              .made_for = spec.made_for};
  d.step = [](Builder&, const StepInputs&) { return StepOutputs{}; };  // it only predicts
  d.predict = PredictSpec{.inputs = {"token", "position"},
                          .outputs = {"logits"},
                          .forward = [step = spec.decode->step](Builder& b, const StepInputs& in) {
                            return std::vector<Prediction>{
                                {.name = "logits", .value = step(b, in["token"], in["position"])}};
                          }};
  return d;
}

absl::Status buildInitGraph(ir::Module& m, ir::Graph& g) {
  for (const ir::Var& v : m.vars()) {
    auto value = g.create(ir::InitializeArgs{.var = v.name}.spec({.names = {v.name}}));
    if (!value.ok()) return value.status();
    auto assign = g.create(ir::AssignArgs{.value = (*value)->result(), .var = v.name}.spec());
    if (!assign.ok()) return assign.status();
  }
  return absl::OkStatus();
}

namespace {

// The checks every module of a model starts with: the batch, the label smoothing, and
// inputs of distinct names and positive dimensions.
absl::Status checkModel(const ModelSpec& spec, const BuildOptions& opts) {
  // The upper bound keeps every tensor's byte count far from int64 overflow.
  if (opts.batch < 1 || opts.batch > kMaxBatch)
    return absl::InvalidArgumentError(
        absl::StrCat("batch size must be in [1, ", kMaxBatch, "], got ", opts.batch));
  // Written so that NaN fails too.
  if (!(opts.label_smoothing >= 0 && opts.label_smoothing < 1))
    return absl::InvalidArgumentError(
        absl::StrCat("label smoothing must be in [0, 1), got ", opts.label_smoothing));
  if (spec.inputs.empty() || !spec.step)
    return absl::InvalidArgumentError(
        absl::StrCat("model ", spec.name, " needs inputs and a step function"));
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const ModelInput& in = spec.inputs[i];
    for (size_t j = 0; j < i; ++j)
      if (spec.inputs[j].name == in.name)
        return absl::InvalidArgumentError(
            absl::StrCat("model ", spec.name, " has two inputs named '", in.name, "'"));
    for (int64_t d : in.shape)
      if (d < 1)
        return absl::InvalidArgumentError(absl::StrCat("model ", spec.name, ": input '", in.name,
                                                       "' has a dimension ", d, " < 1"));
  }
  return absl::OkStatus();
}

// A prediction's declaration against its model: inputs among the model's, each once;
// outputs named, each once.
absl::Status checkPredictSpec(const ModelSpec& spec) {
  if (!spec.predict)
    return absl::InvalidArgumentError(
        absl::StrCat("model ", spec.name, " declares no prediction (ModelSpec::predict)"));
  const PredictSpec& p = *spec.predict;
  if (p.inputs.empty() || p.outputs.empty() || !p.forward)
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.name, ": its prediction needs inputs, outputs and a forward function"));
  const auto names = [](std::string* out, const ModelInput& in) { out->append(in.name); };
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (std::none_of(spec.inputs.begin(), spec.inputs.end(),
                     [&](const ModelInput& in) { return in.name == p.inputs[i]; }))
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", spec.name, ": its prediction takes input '", p.inputs[i],
          "', which is not among its inputs (", absl::StrJoin(spec.inputs, ", ", names), ")"));
    if (std::find(p.inputs.begin(), p.inputs.begin() + i, p.inputs[i]) != p.inputs.begin() + i)
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", spec.name, ": its prediction takes input '", p.inputs[i], "' twice"));
  }
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (std::find(p.outputs.begin(), p.outputs.begin() + i, p.outputs[i]) != p.outputs.begin() + i)
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", spec.name, ": its prediction declares output '", p.outputs[i], "' twice"));
  return absl::OkStatus();
}

/// @predict_step: the inputs the prediction reads (batch first), its forward in inference
/// mode, then its outputs, each checked to hold one row per example.
absl::Status buildPredictStep(const ModelSpec& spec, Builder& b, ir::Graph* g, int64_t batch) {
  const PredictSpec& p = *spec.predict;
  BuilderInternals::beginGraph(b, g, /*training=*/false);
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const std::string& name : p.inputs) {
    const ModelInput& in = *std::find_if(spec.inputs.begin(), spec.inputs.end(),
                                         [&](const ModelInput& i) { return i.name == name; });
    inputs.emplace_back(in.name, stepInput(b, in, batch));
  }
  const std::vector<Prediction> out =
      p.forward(b, StepInputs(b, std::move(inputs), "its prediction"));
  if (!b.status().ok()) return b.status();
  const auto name = [](std::string* text, const Prediction& o) { text->append(o.name); };
  if (out.size() != p.outputs.size() ||
      !std::equal(
          out.begin(), out.end(), p.outputs.begin(),
          [](const Prediction& o, const std::string& declared) { return o.name == declared; }))
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.name, ": its prediction returns outputs (", absl::StrJoin(out, ", ", name),
        ") but it declares (", absl::StrJoin(p.outputs, ", "), ")"));
  std::vector<ir::Value*> returned;
  for (const Prediction& o : out) {
    const std::string what =
        absl::StrCat("model ", spec.name, ": its prediction's output '", o.name, "'");
    if (!o.value.valid())
      return absl::InvalidArgumentError(absl::StrCat(what, " is an empty tensor handle"));
    const TensorType& type = o.value.value()->type();
    if (type.dtype != ir::DType::kF32 && type.dtype != ir::DType::kI32)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is ", ir::toString(type), "; an output is f32 or i32"));
    if (type.rank() == 0 || type.shape[0] != batch)
      return absl::InvalidArgumentError(absl::StrCat(what, " is ", ir::toString(type),
                                                     ", not one row per example of the batch (",
                                                     batch, ", ...)"));
    if (std::find(returned.begin(), returned.end(), o.value.value()) != returned.end() ||
        o.value.value()->def()->op() == Op::kInput)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is ",
                       o.value.value()->def()->op() == Op::kInput ? "an input passed through"
                                                                  : "another output's tensor",
                       "; each output is a tensor the forward computes"));
    returned.push_back(o.value.value());
  }
  g->setOutputs(std::move(returned));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ir::Module>> buildModule(const ModelSpec& spec,
                                                        const BuildOptions& opts) {
  RETURN_IF_ERROR(checkModel(spec, opts));
  auto m = std::make_unique<ir::Module>(spec.name);
  Builder b = BuilderInternals::make(*m, opts);
  auto init = m->addGraph(std::string(ir::kInitGraph));
  auto train = m->addGraph(std::string(ir::kTrainGraph));
  auto eval = m->addGraph(std::string(ir::kEvalGraph));
  if (!init.ok() || !train.ok() || !eval.ok()) return absl::InternalError("graph names clash");
  if (absl::Status s = buildStep(spec, b, *train, /*training=*/true, opts.batch); !s.ok()) return s;
  if (absl::Status s = buildStep(spec, b, *eval, /*training=*/false, opts.batch); !s.ok()) return s;
  if (absl::Status s = buildInitGraph(*m, **init); !s.ok()) return s;
  return m;
}

absl::StatusOr<std::unique_ptr<ir::Module>> buildPredictModule(const ModelSpec& spec,
                                                               const BuildOptions& opts) {
  RETURN_IF_ERROR(checkModel(spec, opts));
  RETURN_IF_ERROR(checkPredictSpec(spec));
  auto m = std::make_unique<ir::Module>(spec.name);
  Builder b = BuilderInternals::make(*m, opts);
  ASSIGN_OR_RETURN(ir::Graph * g, m->addGraph(std::string(ir::kPredictGraph)));
  RETURN_IF_ERROR(buildPredictStep(spec, b, g, opts.batch));
  // Only what the forward reads: a variable declared and not read (the dropout's step
  // counter, which inference does not use) would be one more for a checkpoint to hold.
  absl::flat_hash_set<std::string> read, unread;
  for (const auto& n : g->nodes())
    if (ir::ParamView::is(*n)) read.insert(ir::ParamView(*n).var());
  for (const ir::Var& v : m->vars())
    if (!read.contains(v.name)) unread.insert(v.name);
  m->removeVars(unread);
  return m;
}

}  // namespace tandem
