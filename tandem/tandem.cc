// The public API over the training library (train/), which `tandem train`
// runs too: options become the CLI's settings, and errors the CLI words with a flag
// (--weight-decay) name the option instead (TrainOptions::weight_decay).

#include "tandem/tandem.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/settings.h"
#include "ir/printer.h"
#include "ir/status_macros.h"
#include "runtime/checkpoint.h"
#include "train/compile.h"
#include "train/model_settings.h"
#include "train/training_data.h"
#include "train/training_session.h"

namespace tandem {
namespace {

// The option of this API that a flag of `tandem train` is.
std::string optionOfFlag(absl::string_view flag) {
  if (flag == "data") return "Data::fashion_mnist";
  if (flag == "limit-train" || flag == "limit-test") {
    std::string name = absl::StrCat("Data::", flag);
    std::replace(name.begin(), name.end(), '-', '_');
    return name;
  }
  if (flag == "resume") return "Model::load";
  std::string name = absl::StrCat("TrainOptions::", flag);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// `status` with every flag its message names (--batch, --weight-decay) as the option it
// is here. The shared path words its errors as the CLI's flags, which map one to one.
absl::Status inApiWords(const absl::Status& status) {
  if (status.ok()) return status;
  const absl::string_view text = status.message();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const bool starts_flag = text.compare(i, 2, "--") == 0 && i + 2 < text.size() &&
                             std::islower(static_cast<unsigned char>(text[i + 2])) &&
                             (i == 0 || text[i - 1] == ' ' || text[i - 1] == '(');
    if (!starts_flag) {
      out += text[i++];
      continue;
    }
    size_t end = i + 2;
    while (end < text.size() &&
           (std::islower(static_cast<unsigned char>(text[end])) ||
            std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '-'))
      ++end;
    out += optionOfFlag(text.substr(i + 2, end - i - 2));
    i = end;
  }
  return absl::Status(status.code(), out);
}

training::ModelSettings settingsOf(const TrainOptions& o) {
  training::ModelSettings s;
  s.devices = o.devices;
  s.batch = o.batch;
  s.optimizer = o.optimizer;
  const std::pair<const char*, const std::optional<double>*> hyper[] = {
      {"lr", &o.lr},       {"momentum", &o.momentum}, {"weight_decay", &o.weight_decay},
      {"beta1", &o.beta1}, {"beta2", &o.beta2},       {"eps", &o.eps}};
  for (const auto& [attr, value] : hyper)
    if (*value) s.hyper[attr] = {.value = **value, .text = training::exactNumber(**value)};
  s.schedule = o.schedule;
  s.warmup = o.warmup;
  s.clip_grad_norm = o.clip_grad_norm;
  s.label_smoothing = o.label_smoothing;
  s.split = o.split;
  s.sync_bn = o.sync_bn;
  s.precision = o.precision;
  s.allreduce_dtype = o.allreduce_dtype;
  return s;
}

// What only this API's options can get wrong (the rest the shared resolution checks).
absl::Status checkOwnOptions(const TrainOptions& o) {
  if (o.epochs < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("TrainOptions::epochs: ", o.epochs, " trains nothing (1 or more)"));
  if (o.threads_per_device < 1 || o.threads_per_device > 1024)
    return absl::InvalidArgumentError(absl::StrCat(
        "TrainOptions::threads_per_device: ", o.threads_per_device, " is out of range [1, 1024]"));
  if (o.split == "auto")
    return absl::InvalidArgumentError(
        "TrainOptions::split: auto re-plans the split from measured speeds, which only "
        "`tandem train --split auto` does; give even or weights such as 3,1");
  return absl::OkStatus();
}

// Examples a program holds as a data set of the model's image shape, every label checked.
absl::StatusOr<runtime::data::Dataset> datasetOf(const Examples& e, const ModelSpec& spec,
                                                 const std::string& name,
                                                 std::optional<int64_t> limit) {
  runtime::data::Dataset d;
  d.source = name;
  d.labels_source = absl::StrCat(name, ".labels");
  d.classes = static_cast<int32_t>(spec.num_classes);
  if (spec.image_shape.size() != 3)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": examples are [count, C, H, W] images, but model ", spec.name,
                     "'s ModelSpec::image_shape is [", absl::StrJoin(spec.image_shape, ","), "]"));
  d.channels = spec.image_shape[0];
  d.rows = spec.image_shape[1];
  d.cols = spec.image_shape[2];
  const int64_t size = d.exampleSize();
  const int64_t count = static_cast<int64_t>(e.labels.size());
  if (size < 1 || static_cast<int64_t>(e.images.size()) != count * size)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".images: ", e.images.size(), " floats for ", count, " labels, but ",
                     count, " images of ", absl::StrJoin(spec.image_shape, "x"), " (model ",
                     spec.name, ") are ", count * size));
  for (size_t i = 0; i < e.labels.size(); ++i)
    if (e.labels[i] < 0 || e.labels[i] >= spec.num_classes)
      return absl::InvalidArgumentError(absl::StrCat(name, ".labels[", i, "]: ", e.labels[i],
                                                     " is not a class of model ", spec.name,
                                                     " (0 to ", spec.num_classes - 1, ")"));
  d.available = count;
  d.count = limit ? std::min(*limit, count) : count;
  d.images.assign(e.images.begin(), e.images.begin() + d.count * size);
  d.labels.assign(e.labels.begin(), e.labels.begin() + d.count);
  return d;
}

absl::StatusOr<training::TrainingData> dataOf(const Data& data, const ModelSpec& spec,
                                            int64_t batch) {
  if (!data.fashion_mnist.empty())
    return training::loadFashionMnist(data.fashion_mnist, data.limit_train, data.limit_test, batch);
  training::TrainingData out;
  ASSIGN_OR_RETURN(out.train, datasetOf(data.train, spec, "Data::train", data.limit_train));
  ASSIGN_OR_RETURN(out.test, datasetOf(data.test, spec, "Data::test", data.limit_test));
  RETURN_IF_ERROR(training::checkTrainingData(out, "Data", data.limit_train, data.limit_test, batch));
  return out;
}

EpochMetrics metricsOf(const runtime::EpochFigures& e) {
  return {.epoch = e.epoch,
          .train_loss = e.train_loss,
          .train_accuracy = e.train_accuracy,
          .test_loss = e.test_loss,
          .test_accuracy = e.test_accuracy,
          .seconds = e.seconds,
          .images_per_second = e.images_per_second};
}

Metrics metricsOf(const runtime::PassResult& r) {
  return {.loss = r.loss, .accuracy = r.accuracy, .examples = r.examples, .seconds = r.seconds};
}

}  // namespace

struct Model::Impl {
  ModelSpec spec;
  TrainOptions options;
  // The data outlives the session, whose loaders read it.
  training::TrainingData data;
  std::unique_ptr<training::TrainingSession> session;
  std::vector<runtime::EpochFigures> figures;
  std::vector<EpochMetrics> history;
  // Where fit goes on: the epoch, and its steps done (a checkpoint written inside one).
  int next_epoch = 1;
  runtime::EpochProgress progress;
  std::optional<runtime::CheckpointWriter> checkpoints;

  absl::Status saveTo(runtime::CheckpointWriter& writer) {
    return writer.save(session->trainer().executor(),
                       session->checkpoint(next_epoch, progress, figures));
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {

// The shared path up to a loaded, initialized module: settings, data, schedule, compile,
// session. Errors in the CLI's words; the callers put them in this API's.
absl::StatusOr<std::unique_ptr<Model::Impl>> prepare(const ModelSpec& spec,
                                                     const TrainOptions& options,
                                                     const Data& data) {
  RETURN_IF_ERROR(checkOwnOptions(options));
  const training::ModelSettings settings = settingsOf(options);
  ASSIGN_OR_RETURN(training::ModelChoice choice,
                   training::resolveModel(spec, settings, /*for_training=*/true));
  auto impl = std::make_unique<Model::Impl>();
  impl->spec = spec;
  impl->options = options;
  const int64_t batch = choice.compile.build.batch;
  ASSIGN_OR_RETURN(impl->data, dataOf(data, spec, batch));
  const int64_t steps_per_epoch = impl->data.train.count / batch;
  ASSIGN_OR_RETURN(runtime::LrSchedule schedule,
                   training::learningRateSchedule(choice, steps_per_epoch, options.epochs));
  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> module,
                   training::compileModel(choice.spec, choice.compile));
  ASSIGN_OR_RETURN(
      impl->session,
      training::TrainingSession::create(
          std::move(module), impl->data.train, impl->data.test,
          {.executor = {.seed = options.seed,
                        .backend_options = {{"threads_per_device", options.threads_per_device}}},
           .seed = options.seed,
           .schedule = choice.compile.pipeline.lr_schedule ? std::optional(schedule) : std::nullopt,
           .model = spec.name,
           .settings = training::resumeSettings(choice, settings, options.seed,
                                                impl->data.train.count, options.epochs)}));
  RETURN_IF_ERROR(impl->session->initialize());
  if (options.checkpoint) {
    impl->checkpoints.emplace(*options.checkpoint, /*writes=*/true);
    RETURN_IF_ERROR(impl->checkpoints->prepare(/*replacing=*/false));
  }
  return impl;
}

}  // namespace

absl::StatusOr<Model> Model::create(const ModelSpec& spec, const TrainOptions& options,
                                    const Data& data) {
  absl::StatusOr<std::unique_ptr<Impl>> impl = prepare(spec, options, data);
  if (!impl.ok()) return inApiWords(impl.status());
  return Model(*std::move(impl));
}

absl::StatusOr<Model> Model::load(const ModelSpec& spec, const TrainOptions& options,
                                  const Data& data, const std::string& dir) {
  // Read and verified before anything slow: a bad checkpoint fails at once.
  absl::StatusOr<runtime::Checkpoint> c = runtime::readCheckpointFile(dir);
  if (!c.ok())
    return absl::InvalidArgumentError(absl::StrCat("Model::load: ", c.status().message()));
  if (c->epoch - 1 > options.epochs)
    return absl::InvalidArgumentError(
        absl::StrCat("TrainOptions::epochs: ", options.epochs, " is fewer than the ", c->epoch - 1,
                     " epochs '", runtime::checkpointPath(dir), "' has finished already"));
  absl::StatusOr<std::unique_ptr<Impl>> impl = prepare(spec, options, data);
  if (!impl.ok()) return inApiWords(impl.status());
  const std::string path = runtime::checkpointPath(dir);
  training::TrainingSession& session = *(*impl)->session;
  absl::Status restored = runtime::checkCompatible(*c, spec.name, session.options().settings, path);
  if (restored.ok()) restored = session.restore(*c, path);
  if (!restored.ok())
    return inApiWords(absl::InvalidArgumentError(absl::StrCat("--resume: ", restored.message())));
  (*impl)->next_epoch = c->epoch;
  (*impl)->progress = c->progress;
  (*impl)->figures = c->history;
  for (const runtime::EpochFigures& e : c->history) (*impl)->history.push_back(metricsOf(e));
  return Model(*std::move(impl));
}

absl::StatusOr<std::vector<EpochMetrics>> Model::fit(const Callbacks& callbacks) {
  Impl& m = *impl_;
  while (m.next_epoch <= m.options.epochs) {
    const int epoch = m.next_epoch;
    // A copy: the callback below updates m.progress while the epoch counts on from this.
    const runtime::EpochProgress from = m.progress;
    bool stopped = false;
    ASSIGN_OR_RETURN(runtime::PassResult r,
                     m.session->trainEpoch(epoch, from, [&](const runtime::StepReport& s) {
                       m.progress = {.steps = s.step,
                                     .examples = s.examples,
                                     .correct = s.correct,
                                     .loss_sum = s.loss_sum,
                                     .seconds = s.seconds};
                       if (!callbacks.on_step) return true;
                       stopped = !callbacks.on_step({.epoch = epoch,
                                                     .step = s.step,
                                                     .steps = s.steps,
                                                     .examples = s.examples,
                                                     .loss = s.loss,
                                                     .mean_loss = s.mean_loss,
                                                     .seconds = s.seconds});
                       return !stopped;
                     }));
    if (stopped) {  // inside the epoch: a checkpoint takes it as it stands, fit goes on
      if (m.checkpoints) RETURN_IF_ERROR(m.saveTo(*m.checkpoints));
      break;
    }
    ASSIGN_OR_RETURN(runtime::PassResult t, m.session->evaluate());
    m.figures.push_back(m.session->figures(epoch, r, t));
    m.history.push_back(metricsOf(m.figures.back()));
    m.next_epoch = epoch + 1;  // the run after this epoch, as its checkpoint says
    m.progress = {};
    if (m.checkpoints) RETURN_IF_ERROR(m.saveTo(*m.checkpoints));
    if (callbacks.on_epoch && !callbacks.on_epoch(m.history.back())) break;
  }
  return m.history;
}

absl::StatusOr<Metrics> Model::evaluate() {
  ASSIGN_OR_RETURN(runtime::PassResult r, impl_->session->evaluate());
  return metricsOf(r);
}

absl::StatusOr<Metrics> Model::evaluate(const Examples& examples) {
  ASSIGN_OR_RETURN(runtime::data::Dataset data,
                   datasetOf(examples, impl_->spec, "examples", std::nullopt));
  if (data.count == 0)
    return absl::InvalidArgumentError("examples: holds no images: nothing to evaluate");
  ASSIGN_OR_RETURN(runtime::PassResult r, impl_->session->evaluateOn(data));
  return metricsOf(r);
}

absl::Status Model::save(const std::string& dir, bool replace) {
  runtime::CheckpointWriter writer(dir, /*writes=*/true);
  if (absl::Status s = writer.prepare(/*replacing=*/replace); !s.ok())
    return absl::Status(s.code(), absl::StrCat("Model::save: ", s.message()));
  return impl_->saveTo(writer);
}

const std::vector<EpochMetrics>& Model::history() const { return impl_->history; }
int Model::nextEpoch() const { return impl_->next_epoch; }

std::string Model::trainStepText() const {
  const ir::Module& m = impl_->session->trainer().executor().module();
  return ir::printGraph(*m.graph(ir::kTrainGraph));
}

absl::StatusOr<Model> train(const ModelSpec& spec, const TrainOptions& options, const Data& data,
                            const Callbacks& callbacks) {
  ASSIGN_OR_RETURN(Model model, Model::create(spec, options, data));
  RETURN_IF_ERROR(model.fit(callbacks).status());
  return model;
}

}  // namespace tandem
