// The public API over the training library (train/), which `tandem train` runs too: this
// file turns its TrainConfig into the library's, names settings in its own words
// (ApiNames) and hands the session's events to the program's callbacks.

#include "tandem/tandem.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend/settings.h"
#include "ir/printer.h"
#include "ir/status_macros.h"
#include "ir/types.h"
#include "runtime/data/dataset_source.h"
#include "runtime/data/memory_source.h"
#include "runtime/data/subset_source.h"
#include "runtime/executor.h"
#include "runtime/host_tensor.h"
#include "runtime/predictor.h"
#include "train/compile.h"
#include "train/generation.h"
#include "train/settings_text.h"
#include "train/training_session.h"

namespace tandem {
namespace {

using training::Setting;

// This API's words for the library's settings: TrainConfig's fields, Data's, and the call
// that gave a checkpoint to continue.
class ApiNames final : public training::SettingNames {
 public:
  std::string name(Setting s) const override {
    switch (s) {
      case Setting::kData:
        return "Data::spec";
      case Setting::kTestData:
        return "Data::test_spec";
      case Setting::kValFraction:
        return "Data::val_fraction";
      case Setting::kAugment:
        return "Data::augment";
      case Setting::kLimitTrain:
        return "Data::limit_train";
      case Setting::kLimitTest:
        return "Data::limit_test";
      case Setting::kResume:
        return "Model::load";
      case Setting::kModel:
        return "ModelSpec::name";
      default:
        return absl::StrCat("TrainConfig::", training::settingKey(s));
    }
  }
};

const ApiNames& apiNames() {
  static const ApiNames names;
  return names;
}

// The settings this API holds as text read as the CLI reads its flags
// (train/settings_text.h), errors naming TrainConfig's fields.
absl::StatusOr<training::ModelSettings> modelSettingsOf(const TrainConfig& c,
                                                        const ModelSpec& spec) {
  training::WrittenSettings written{.devices = c.devices,
                                    .optimizer = c.optimizer,
                                    .split = c.split,
                                    .precision = c.precision,
                                    .allreduce_dtype = c.allreduce_dtype};
  const std::pair<const char*, const std::optional<double>*> hyper[] = {
      {"lr", &c.lr},       {"momentum", &c.momentum}, {"weight_decay", &c.weight_decay},
      {"beta1", &c.beta1}, {"beta2", &c.beta2},       {"eps", &c.eps}};
  for (const auto& [attr, value] : hyper)
    if (*value) written.hyper[attr] = {.value = **value, .text = training::exactNumber(**value)};
  training::ModelSettings s{.batch = c.batch,
                            .schedule = c.schedule,
                            .warmup = c.warmup,
                            .clip_grad_norm = c.clip_grad_norm,
                            .label_smoothing = c.label_smoothing,
                            .sync_bn = c.sync_bn};
  RETURN_IF_ERROR(
      training::parseWrittenSettings(written, spec, /*for_training=*/true, apiNames(), s));
  return s;
}

// A classifier's image shape: its f32 input besides the labels ([] for another model).
std::vector<int64_t> imageShapeOf(const ModelSpec& spec) {
  for (const ModelInput& in : spec.inputs)
    if (spec.labels && in.name != spec.labels->input && in.dtype == ir::DType::kF32)
      return in.shape;
  return {};
}

// "x: f32[1,28,28], y: i32[]"
std::string inputsText(const ModelSpec& spec) {
  return absl::StrJoin(spec.inputs, ", ", [](std::string* out, const ModelInput& in) {
    absl::StrAppend(out, in.name, ": ", ir::dtypeName(in.dtype), "[", absl::StrJoin(in.shape, ","),
                    "]");
  });
}

// Examples a program holds as a data set of the model's image shape, every label checked.
absl::StatusOr<runtime::data::Dataset> datasetOf(const Examples& e, const ModelSpec& spec,
                                                 const std::string& name) {
  runtime::data::Dataset d;
  d.source = name;
  d.labels_source = absl::StrCat(name, ".labels");
  const std::vector<int64_t> image_shape = imageShapeOf(spec);
  if (!spec.labels || image_shape.size() != 3)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": examples are [count, C, H, W] images and class labels, but model ",
                     spec.name, " takes ", inputsText(spec)));
  const int64_t classes = spec.labels->classes;
  d.classes = static_cast<int32_t>(classes);
  d.channels = image_shape[0];
  d.rows = image_shape[1];
  d.cols = image_shape[2];
  const int64_t size = d.exampleSize();
  const int64_t count = static_cast<int64_t>(e.labels.size());
  if (size < 1 || static_cast<int64_t>(e.images.size()) != count * size)
    return absl::InvalidArgumentError(absl::StrCat(name, ".images: ", e.images.size(),
                                                   " floats for ", count, " labels, but ", count,
                                                   " images of ", absl::StrJoin(image_shape, "x"),
                                                   " (model ", spec.name, ") are ", count * size));
  for (size_t i = 0; i < e.labels.size(); ++i)
    if (e.labels[i] < 0 || e.labels[i] >= classes)
      return absl::InvalidArgumentError(absl::StrCat(name, ".labels[", i, "]: ", e.labels[i],
                                                     " is not a class of model ", spec.name,
                                                     " (0 to ", classes - 1, ")"));
  d.available = count;
  d.count = count;
  d.images = e.images;
  d.labels = e.labels;
  return d;
}

// The data as the library's data source: specs it opens itself, or data sets and examples
// the program holds.
absl::StatusOr<training::DataSource> dataSourceOf(const Data& data, const ModelSpec& spec) {
  const int given = !data.spec.empty() + !data.fashion_mnist.empty() +
                    (data.train_set != nullptr || data.test_set != nullptr) +
                    (!data.train.labels.empty() || !data.train.images.empty());
  if (given > 1)
    return absl::InvalidArgumentError(
        "Data: give one of spec, fashion_mnist, train_set and test_set, or train and test");
  if (!data.spec.empty() || !data.fashion_mnist.empty())
    return training::DataSource{
        .spec = data.spec.empty() ? absl::StrCat("fashion-mnist:", data.fashion_mnist) : data.spec,
        .test_spec = data.test_spec,
        .val_fraction = data.val_fraction,
        .augment = data.augment};
  auto held = std::make_shared<training::TrainingData>();
  if (data.train_set != nullptr || data.test_set != nullptr) {
    if (data.train_set == nullptr || data.test_set == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat("Data::", data.train_set == nullptr ? "train_set" : "test_set",
                       " is not given (give both, or a spec with val_fraction)"));
    held->train = data.train_set;
    held->test = data.test_set;
  } else {
    for (auto [part, examples] :
         {std::pair{&held->train, &data.train}, std::pair{&held->test, &data.test}}) {
      const std::string name = part == &held->train ? "Data::train" : "Data::test";
      ASSIGN_OR_RETURN(runtime::data::Dataset d, datasetOf(*examples, spec, name));
      *part = std::make_shared<runtime::data::DatasetSource>(
          std::make_shared<const runtime::data::Dataset>(std::move(d)));
    }
  }
  return training::DataSource{.examples = std::move(held)};
}

absl::StatusOr<training::TrainConfig> configOf(const TrainConfig& c, const Data& data,
                                               const ModelSpec& spec) {
  ASSIGN_OR_RETURN(training::ModelSettings model, modelSettingsOf(c, spec));
  ASSIGN_OR_RETURN(training::DataSource source, dataSourceOf(data, spec));
  return training::TrainConfig{
      .model = std::move(model),
      .epochs = c.epochs,
      .steps = c.steps,
      .eval_every = c.eval_every,
      .seed = c.seed,
      .data = std::move(source),
      .limit_train = data.limit_train,
      .limit_test = data.limit_test,
      .checkpoint = c.checkpoint,
      .checkpoint_every = c.checkpoint_every,
      .allow_nonfinite = c.allow_nonfinite,
      .executor = {.backend_options = {{"threads_per_device", c.threads_per_device}}}};
}

std::vector<std::pair<std::string, double>> namedValues(
    const std::vector<runtime::MetricValue>& metrics) {
  std::vector<std::pair<std::string, double>> out;
  for (const runtime::MetricValue& v : metrics) out.emplace_back(v.name, v.value);
  return out;
}

EpochMetrics metricsOf(const runtime::EpochFigures& e) {
  return {.epoch = e.epoch,
          .train_loss = e.train_loss,
          .train_accuracy = e.train_accuracy,
          .test_loss = e.test_loss,
          .test_accuracy = e.test_accuracy,
          .seconds = e.seconds,
          .images_per_second = e.images_per_second,
          .train_metrics = namedValues(e.train_metrics),
          .test_metrics = namedValues(e.test_metrics)};
}

Metrics metricsOf(const runtime::PassResult& r) {
  return {.loss = r.loss,
          .accuracy = r.accuracy,
          .examples = r.examples,
          .seconds = r.seconds,
          .metrics = namedValues(r.metrics)};
}

}  // namespace

struct Model::Impl {
  // The session's events, as the program's callbacks of the fit in progress.
  class CallbackListener final : public training::TrainListener {
   public:
    const Callbacks* callbacks = nullptr;

    bool onStep(const training::StepEvent& e) override {
      if (callbacks == nullptr || !callbacks->on_step) return true;
      const runtime::StepReport& s = e.report;
      return callbacks->on_step({.epoch = e.epoch,
                                 .step = s.step,
                                 .steps = s.steps,
                                 .examples = s.examples,
                                 .loss = s.loss,
                                 .mean_loss = s.mean_loss,
                                 .seconds = s.seconds});
    }
    absl::Status onCheckpoint(const training::CheckpointEvent& e) override {
      if (callbacks != nullptr && callbacks->on_checkpoint)
        callbacks->on_checkpoint({.epoch = e.epoch, .steps = e.steps, .dir = e.dir});
      return absl::OkStatus();
    }
    absl::StatusOr<bool> onEpoch(const runtime::EpochFigures& e, bool replayed) override {
      if (replayed || callbacks == nullptr || !callbacks->on_epoch) return true;
      return callbacks->on_epoch(metricsOf(e));
    }
  };

  ModelSpec spec;
  int threads_per_device = 1;
  // Model::predict's forward module, compiled on its first call.
  std::unique_ptr<runtime::Predictor> predictor;
  // Declared before the session, which holds a reference to it: destroyed after it.
  std::unique_ptr<CallbackListener> listener = std::make_unique<CallbackListener>();
  std::unique_ptr<training::TrainingSession> session;
  std::vector<EpochMetrics> history;

  const std::vector<EpochMetrics>& historyNow() {
    history.clear();
    for (const runtime::EpochFigures& e : session->history()) history.push_back(metricsOf(e));
    return history;
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {

absl::StatusOr<std::unique_ptr<Model::Impl>> open(const ModelSpec& spec, const TrainConfig& config,
                                                  const Data& data,
                                                  std::optional<std::string> resume) {
  ASSIGN_OR_RETURN(training::TrainConfig c, configOf(config, data, spec));
  c.resume = std::move(resume);
  auto impl = std::make_unique<Model::Impl>();
  impl->spec = spec;
  impl->threads_per_device = config.threads_per_device;
  ASSIGN_OR_RETURN(impl->session, training::TrainingSession::create(spec, std::move(c), apiNames(),
                                                                    *impl->listener));
  impl->historyNow();
  return impl;
}

}  // namespace

absl::StatusOr<Model> Model::create(const ModelSpec& spec, const TrainConfig& config,
                                    const Data& data) {
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, open(spec, config, data, std::nullopt));
  return Model(std::move(impl));
}

absl::StatusOr<Model> Model::load(const ModelSpec& spec, const TrainConfig& config,
                                  const Data& data, const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, open(spec, config, data, dir));
  return Model(std::move(impl));
}

absl::StatusOr<std::vector<EpochMetrics>> Model::fit(const Callbacks& callbacks) {
  impl_->listener->callbacks = &callbacks;
  absl::StatusOr<training::RunEnd> end = impl_->session->fit();
  impl_->listener->callbacks = nullptr;
  RETURN_IF_ERROR(end.status());
  if (end->why == training::RunEnd::Why::kNonFinite)
    return absl::AbortedError(absl::StrFormat("the loss is %g at epoch %d, step %d of %d: %s",
                                              end->bad_step.loss, end->epoch, end->bad_step.step,
                                              end->bad_step.steps, end->cause));
  return impl_->historyNow();
}

absl::StatusOr<Metrics> Model::evaluate() {
  ASSIGN_OR_RETURN(runtime::PassResult r, impl_->session->evaluate());
  return metricsOf(r);
}

absl::StatusOr<Metrics> Model::evaluate(const Examples& examples) {
  ASSIGN_OR_RETURN(runtime::data::Dataset data, datasetOf(examples, impl_->spec, "examples"));
  if (data.count == 0)
    return absl::InvalidArgumentError("examples: holds no images: nothing to evaluate");
  const runtime::data::DatasetSource source(
      std::make_shared<const runtime::data::Dataset>(std::move(data)));
  ASSIGN_OR_RETURN(runtime::PassResult r, impl_->session->evaluateOn(source));
  return metricsOf(r);
}

absl::StatusOr<Metrics> Model::evaluate(const Dataset& data) {
  if (data.size() == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(data.where(), " holds no examples: nothing to evaluate"));
  ASSIGN_OR_RETURN(runtime::PassResult r, impl_->session->evaluateOn(data));
  return metricsOf(r);
}

namespace {

// The prediction's inputs as a source of examples: each Array as the model input of its
// name takes it, checked against it. Errors start with "Model::predict: ".
absl::StatusOr<std::unique_ptr<runtime::data::MemorySource>> predictionInputs(
    const ModelSpec& spec, const Arrays& inputs) {
  const auto fail = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("Model::predict: ", what));
  };
  const PredictSpec& p = *spec.predict;
  for (const auto& [name, array] : inputs)
    if (std::none_of(spec.inputs.begin(), spec.inputs.end(),
                     [&](const ModelInput& in) { return in.name == name; }))
      return fail(absl::StrCat("input '", name, "' is not one of model ", spec.name, "'s (",
                               inputsText(spec), ")"));
  std::vector<runtime::data::HostArray> arrays;
  for (const std::string& name : p.inputs) {
    const auto it = inputs.find(name);
    const ModelInput& in = *std::find_if(spec.inputs.begin(), spec.inputs.end(),
                                         [&](const ModelInput& i) { return i.name == name; });
    const std::string wanted =
        absl::StrCat(ir::dtypeName(in.dtype), "[count,", absl::StrJoin(in.shape, ","), "]");
    if (it == inputs.end())
      return fail(absl::StrCat("model ", spec.name, " predicts from input '", name, "' (", wanted,
                               "), which `inputs` does not give"));
    const Array& a = it->second;
    const bool floats = in.dtype == ir::DType::kF32;
    if ((floats ? !a.i32.empty() : !a.f32.empty()) ||
        (in.dtype != ir::DType::kF32 && in.dtype != ir::DType::kI32 &&
         in.dtype != ir::DType::kI64))  // an i64 input takes i32 values, widened
      return fail(absl::StrCat("input '", name, "' holds ", floats ? "i32" : "f32",
                               " values, but model ", spec.name, " takes ", wanted));
    std::vector<int64_t> example(a.shape.begin() + std::min<size_t>(1, a.shape.size()),
                                 a.shape.end());
    if (a.shape.empty() || example != in.shape)
      return fail(absl::StrCat("input '", name, "' is [", absl::StrJoin(a.shape, ","),
                               "], but model ", spec.name, " takes ", wanted));
    arrays.push_back(floats ? runtime::data::HostArray::of(name, a.f32, a.shape)
                            : runtime::data::HostArray::of(name, a.i32, a.shape));
  }
  absl::StatusOr<std::unique_ptr<runtime::data::MemorySource>> source =
      runtime::data::MemorySource::create(std::move(arrays), "Model::predict's inputs");
  if (!source.ok()) return fail(std::string(source.status().message()));
  return source;
}

}  // namespace

absl::StatusOr<Arrays> Model::predict(const Arrays& inputs,
                                      const std::function<bool(int64_t, int64_t)>& on_batch) {
  const ModelSpec& spec = impl_->spec;
  if (!spec.predict)
    return absl::FailedPreconditionError(absl::StrCat(
        "Model::predict: model ", spec.name, " declares no prediction (ModelSpec::predict)"));
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::data::MemorySource> source,
                   predictionInputs(spec, inputs));
  runtime::Executor& trained = impl_->session->executor();
  if (impl_->predictor == nullptr) {
    // The training run's devices, split, precision and batch.
    const training::CompileOptions& compiled = impl_->session->choice().compile;
    ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> module,
                     training::compilePrediction(spec, compiled.build.batch, compiled.pipeline));
    runtime::ExecutorOptions options;
    options.backend_options.set("threads_per_device", impl_->threads_per_device);
    ASSIGN_OR_RETURN(impl_->predictor,
                     runtime::Predictor::create(std::move(module), spec.predict->outputs, options));
  }
  runtime::Predictor& predictor = *impl_->predictor;
  // The weights as they stand, from the first device (the running statistics of batch norm
  // differ between devices without sync batch norm; a prediction must not depend on the
  // device an example lands on).
  for (const ir::Var& v : predictor.module().vars()) {
    ASSIGN_OR_RETURN(runtime::HostTensor value, trained.readVariable(v.name, 0));
    RETURN_IF_ERROR(predictor.setVariable(v.name, value));
  }
  if (source->size() == 0) return Arrays{};
  int64_t done = 0;
  ASSIGN_OR_RETURN(std::vector<runtime::PredictedOutput> outputs,
                   predictor.predict(*source, [&](const runtime::data::Batch&, int64_t batches) {
                     return !on_batch || on_batch(++done, batches);
                   }));
  Arrays out;
  for (const runtime::PredictedOutput& o : outputs) {
    Array& a = out[o.name];
    a.shape.assign(o.value.type.shape.begin(), o.value.type.shape.end());
    const size_t n = static_cast<size_t>(o.value.type.numElements());
    if (o.value.type.dtype == ir::DType::kI32)
      a.i32.assign(o.value.i32(), o.value.i32() + n);
    else
      a.f32.assign(o.value.f32(), o.value.f32() + n);
  }
  return out;
}

absl::Status Model::save(const std::string& dir, bool replace) {
  return impl_->session->save(dir, replace, {.setting = "Model::save", .resume = "Model::load"});
}

const std::vector<EpochMetrics>& Model::history() const { return impl_->history; }
int Model::nextEpoch() const { return impl_->session->nextEpoch(); }

std::string Model::trainStepText() const {
  return ir::printGraph(*impl_->session->executor().module().graph(ir::kTrainGraph));
}

absl::StatusOr<std::vector<int32_t>> Model::generate(const std::vector<int32_t>& prompt,
                                                     const GenerateConfig& config,
                                                     const std::function<bool(int32_t)>& on_token) {
  const ModelSpec& spec = impl_->spec;
  if (!spec.decode)
    return absl::FailedPreconditionError(absl::StrCat(
        "Model::generate: model ", spec.name, " declares no decoding step (ModelSpec::decode)"));
  ASSIGN_OR_RETURN(const ir::Device device, ir::parseDevice(config.device));
  const runtime::Executor& trained = impl_->session->executor();
  auto value_of = [&](const ir::Var& var) { return trained.readVariable(var.name, 0); };
  ASSIGN_OR_RETURN(std::unique_ptr<training::Generator> gen,
                   training::Generator::create(spec, device, value_of));
  return gen->generate(
      prompt, config.tokens,
      {.temperature = config.temperature, .top_k = config.top_k, .seed = config.seed}, on_token);
}

absl::StatusOr<std::vector<Weight>> Model::weights() const {
  const runtime::Executor& ex = impl_->session->executor();
  std::vector<Weight> out;
  for (const ir::Var& v : ex.module().vars()) {
    if (v.role != ir::VarRole::kParam) continue;
    // Device 0: the API runs in one process, which holds every device.
    ASSIGN_OR_RETURN(runtime::HostTensor t, ex.readVariable(v.name, 0));
    out.push_back(
        Weight{.name = v.name,
               .dtype = t.type.dtype,
               .shape = std::vector<int64_t>(t.type.shape.begin(), t.type.shape.end()),
               .bytes = std::string(t.buffer.data(), static_cast<size_t>(t.type.bytes()))});
  }
  return out;
}

absl::Status Model::setWeights(const std::vector<Weight>& weights) {
  runtime::Executor& ex = impl_->session->executor();
  const ir::Module& m = ex.module();
  const auto error = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("Model::setWeights: ", what));
  };
  // Every weight is checked before any is written: a refusal leaves the model as it was.
  std::vector<runtime::HostTensor> values;
  std::map<std::string, const Weight*> given;
  for (const Weight& w : weights) {
    const ir::Var* v = m.findVar(w.name);
    if (v == nullptr || v->role != ir::VarRole::kParam)
      return error(absl::StrCat("'", w.name, "' is not a parameter of model ", impl_->spec.name,
                                " (Model::weights lists them)"));
    if (!given.emplace(w.name, &w).second)
      return error(absl::StrCat("'", w.name, "' is given twice"));
    const ir::TensorType type{w.dtype, ir::Shape(w.shape.begin(), w.shape.end())};
    if (!(type == v->type))
      return error(absl::StrCat("'", w.name, "' is ", ir::toString(type), ", but model ",
                                impl_->spec.name, " has it as ", ir::toString(v->type)));
    if (static_cast<int64_t>(w.bytes.size()) != v->type.bytes())
      return error(absl::StrCat("'", w.name, "' holds ", w.bytes.size(), " bytes, but ",
                                ir::toString(v->type), " is ", v->type.bytes()));
    runtime::HostTensor& t = values.emplace_back(v->type);
    std::memcpy(t.buffer.data(), w.bytes.data(), w.bytes.size());
  }
  for (size_t k = 0; k < weights.size(); ++k)
    for (size_t d = 0; d < m.devices().size(); ++d)
      RETURN_IF_ERROR(ex.writeVariable(weights[k].name, d, values[k]));
  return absl::OkStatus();
}

absl::StatusOr<Model> train(const ModelSpec& spec, const TrainConfig& config, const Data& data,
                            const Callbacks& callbacks) {
  ASSIGN_OR_RETURN(Model model, Model::create(spec, config, data));
  RETURN_IF_ERROR(model.fit(callbacks).status());
  return model;
}

}  // namespace tandem
