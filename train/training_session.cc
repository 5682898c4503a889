#include "train/training_session.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend/processes.h"
#include "backend/settings.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "runtime/data/token_source.h"
#include "runtime/nonfinite_variables.h"
#include "train/compile.h"
#include "train/rank_agreement.h"

namespace tandem::training {
namespace {

// Checkpoints before issue 41 named their settings by `tandem train`'s flags.
void settingsByKey(runtime::Checkpoint& c) {
  for (auto& [key, value] : c.settings)
    if (Setting s; settingOfKey(key, &s)) key = std::string(settingKey(s));
}

}  // namespace

int64_t defaultBatch(int64_t train_examples, int64_t devices) {
  constexpr int64_t kBatch = 256, kSmallest = 32, kStepsPerEpoch = 16;
  int64_t batch = kBatch;
  while (batch > std::max(kSmallest, devices) && train_examples / batch < kStepsPerEpoch)
    batch /= 2;
  return std::max(batch, devices);
}

int64_t windowLengthOf(const ModelSpec& spec) {
  for (const ModelInput& in : spec.inputs)
    if (in.name == "x" && (in.dtype == ir::DType::kI32 || in.dtype == ir::DType::kI64) &&
        in.shape.size() == 1)
      return in.shape[0];
  return 0;
}

bool writesWhereItResumes(const TrainConfig& c) {
  if (!c.checkpoint || !c.resume) return false;
  std::error_code ignored;  // the checkpoint directory need not exist yet
  return *c.checkpoint == *c.resume || std::filesystem::equivalent(*c.checkpoint, *c.resume, ignored);
}

absl::StatusOr<std::unique_ptr<TrainingSession>> TrainingSession::create(const ModelSpec& spec,
                                                                         TrainConfig config,
                                                                         const SettingNames& names,
                                                                         TrainListener& listener) {
  std::unique_ptr<TrainingSession> s(new TrainingSession(names, listener));
  s->config_ = std::move(config);
  // Token data is read in windows of the model's context when its spec gives no length.
  if (s->config_.data.window_length == 0) s->config_.data.window_length = windowLengthOf(spec);
  RETURN_IF_ERROR(s->openData());
  RETURN_IF_ERROR(s->prepare(spec));
  RETURN_IF_ERROR(s->readResumed());
  RETURN_IF_ERROR(s->checkData());
  RETURN_IF_ERROR(s->checkResumedFits());
  // A stop signal before training leaves nothing to keep: the front end says so.
  auto stopped = [&] { return listener.stopSignal() != 0; };
  if (stopped()) return absl::CancelledError("stopped before training started");
  RETURN_IF_ERROR(s->compileAndLoad());
  if (stopped()) return absl::CancelledError("stopped before training started");
  RETURN_IF_ERROR(s->start());
  RETURN_IF_ERROR(s->replayResumed());
  return s;
}

// --steps N: the run's epochs become its evaluation periods, `eval_every` steps each, over
// a token source drawing that many batches of random windows an epoch (windows are drawn
// by their key alone, so the corpus is read as any epoch length would read it).
absl::Status TrainingSession::trainBySteps() {
  constexpr int64_t kDefaultEvalEvery = 250;  // nanoGPT's eval_interval for its small models
  const int64_t steps = *config_.steps;
  if (steps < 1)
    return settingError(names_, Setting::kSteps,
                        absl::StrCat(steps, " trains nothing (1 or more)"));
  const int64_t every = config_.eval_every.value_or(std::min(steps, kDefaultEvalEvery));
  if (every < 1 || steps % every != 0)
    return settingError(names_, Setting::kEvalEvery,
                        absl::StrCat(every, " does not divide ", names_(Setting::kSteps), " ",
                                     steps, " into whole evaluation periods"));
  const auto* corpus = dynamic_cast<const runtime::data::TokenSource*>(data_->train.get());
  if (corpus == nullptr)
    return settingError(
        names_, Setting::kSteps,
        absl::StrCat("trains by steps over random windows of token data (tokens:, text:); ",
                     data_->train->where(), " is a set of examples: give ",
                     names_(Setting::kEpochs), " instead"));
  if (steps / every > std::numeric_limits<int>::max())
    return settingError(names_, Setting::kEvalEvery,
                        absl::StrCat(every, " makes too many periods"));
  TrainingData data = *data_;
  data.train = corpus->withEpochWindows(every * *config_.model.batch);
  data_ = std::make_shared<const TrainingData>(std::move(data));
  config_.epochs = static_cast<int>(steps / every);
  return absl::OkStatus();
}

// The settings resolved and checked, the processes agreeing on them, the checkpoint
// directory prepared: everything that can fail before anything slow.
absl::Status TrainingSession::prepare(const ModelSpec& spec) {
  if (config_.epochs < 1)
    return settingError(names_, Setting::kEpochs,
                        absl::StrCat(config_.epochs, " trains nothing (1 or more)"));
  backend::Processes& procs = backend::Processes::current();
  config_.model.ranks = procs.size();
  if (!config_.model.batch)
    config_.model.batch =
        spec.defaults.batch
            ? std::max(*spec.defaults.batch,
                       static_cast<int64_t>(config_.model.devices.size()) * procs.size())
            : defaultBatch(data_->train->size(),
                           static_cast<int64_t>(config_.model.devices.size()) * procs.size());
  if (config_.steps) RETURN_IF_ERROR(trainBySteps());
  ASSIGN_OR_RETURN(choice_, resolveModel(spec, config_.model, /*for_training=*/true, names_));
  // The backends' settings a front end gave, named as it names them (the executor checks
  // them again, in its own words, for callers below this library).
  for (const backend::RegisteredSetting& known : backend::registeredSettings())
    if (const backend::SettingValue* v = config_.executor.backend_options.find(known.spec.name))
      if (const std::string problem = backend::valueProblem(known.spec, *v); !problem.empty()) {
        Setting s;
        return absl::InvalidArgumentError(absl::StrCat(
            settingOfKey(known.spec.name, &s) ? names_(s) : known.spec.name, ": ", problem));
      }
  // conv_algorithm=direct: the plan chooses no convolution algorithm that rounds
  // differently from the direct computation (choose-algorithms{conv=direct}).
  if (const backend::SettingValue* v = config_.executor.backend_options.find("conv_algorithm"))
    if (const auto* word = std::get_if<std::string>(v))
      choice_.compile.pipeline.exact_convolutions = *word == "direct";
  if (procs.several())  // before any collective that a difference would corrupt
    RETURN_IF_ERROR(procs.agree(settingsEveryRankShares(config_, choice_, names_),
                                "comparing the ranks' settings"));
  if (procs.several())  // under mpirun, the kinds must talk across processes
    for (const ir::Device& d : choice_.compile.pipeline.devices)
      if (const ir::TargetInfo* t = ir::findTarget(d.kind);
          t != nullptr && !t->cross_process_collectives)
        return settingError(names_, Setting::kDevices,
                            absl::StrCat(ir::toString(d), " is a ", t->display_name,
                                         " device, which has no collectives across processes "
                                         "(mpirun)"));
  if (procs.several() && choice_.auto_split)
    return settingError(names_, Setting::kSplit,
                        "auto re-plans the split within one process; under mpirun give even or "
                        "weights");
  if (config_.checkpoint_every && !config_.checkpoint)
    return settingError(
        names_, Setting::kCheckpointEvery,
        absl::StrCat("goes with ", names_(Setting::kCheckpoint), " DIR (which is not given)"));
  return absl::OkStatus();
}

// The checkpoint to continue, read and checked against the epochs asked for before
// anything slow; then the directory checkpoints go to, locked and probed.
absl::Status TrainingSession::readResumed() {
  if (config_.resume) {
    resumed_path_ = runtime::checkpointPath(*config_.resume);
    absl::StatusOr<runtime::Checkpoint> read = runtime::readCheckpointFile(*config_.resume);
    if (!read.ok()) return settingError(names_, Setting::kResume, read.status().message());
    resumed_.emplace(*std::move(read));
    settingsByKey(*resumed_);
    if (resumed_->epoch - 1 > config_.epochs)
      return settingError(names_, Setting::kEpochs,
                          absl::StrCat(config_.epochs, " is fewer than the ", resumed_->epoch - 1,
                                       " epochs '", resumed_path_, "' has finished already"));
    if (resumed_->epoch > config_.epochs && resumed_->progress.steps > 0)
      return settingError(
          names_, Setting::kEpochs,
          absl::StrCat(config_.epochs, " ends before epoch ", resumed_->epoch, ", which '",
                       resumed_path_, "' is in already (step ", resumed_->progress.steps, ")"));
  }
  if (config_.checkpoint) {
    // Only rank 0 writes (every rank calls the writer: it gathers every rank's devices).
    checkpoints_.emplace(*config_.checkpoint, backend::Processes::current().rank() == 0,
                         runtime::CheckpointWriter::Words{.setting = names_(Setting::kCheckpoint),
                                                          .resume = names_(Setting::kResume)});
    RETURN_IF_ERROR(checkpoints_->prepare(/*replacing=*/writesWhereItResumes(config_)));
  }
  return absl::OkStatus();
}

absl::Status TrainingSession::openData() {
  const DataSource& source = config_.data;
  if (source.examples == nullptr)
    listener_.onActivity(absl::StrCat("opening the data ", source.spec));
  ASSIGN_OR_RETURN(data_, openTrainingData(source, config_.limit_train, config_.limit_test,
                                           config_.seed, names_));
  return absl::OkStatus();
}

absl::Status TrainingSession::checkData() {
  const int64_t batch = choice_.compile.build.batch;
  RETURN_IF_ERROR(checkTrainingData(*data_, config_.limit_train, batch, names_));
  // The learning-rate schedule over the run's steps (checked before anything slow).
  ASSIGN_OR_RETURN(schedule_, learningRateSchedule(choice_, data_->train->size() / batch,
                                                   config_.epochs, names_,
                                                   config_.steps.has_value()));
  return absl::OkStatus();
}

// The checkpoint continued must be of this model with the settings that change what a
// step computes; --split auto goes on from the split it had reached.
absl::Status TrainingSession::checkResumedFits() {
  if (!resumed_) return absl::OkStatus();
  runtime::CompatibilityNotes notes{.model_setting = names_(Setting::kModel)};
  notes.name_of = [this](const std::string& key) {
    Setting s;
    return settingOfKey(key, &s) ? names_(s) : key;
  };
  // A warmup the user did not give is the model's own, which follows the run's length.
  if (choice_.compile.pipeline.lr_schedule && !choice_.warmup_steps)
    notes.values[std::string(settingKey(Setting::kWarmup))] = absl::StrCat(
        choice_.spec.name, "'s own warmup for ", names_(Setting::kEpochs), " ", config_.epochs);
  if (absl::Status s = runtime::checkCompatible(*resumed_, choice_.spec.name, resumeSettings(),
                                                resumed_path_, notes);
      !s.ok())
    return settingError(names_, Setting::kResume, s.message());
  const size_t devices = choice_.compile.pipeline.devices.size();
  if (choice_.auto_split && resumed_->devices == devices && resumed_->split.size() == devices)
    choice_.compile.pipeline.weights.assign(resumed_->split.begin(), resumed_->split.end());
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> TrainingSession::resumeSettings() const {
  std::vector<std::pair<std::string, std::string>> out = training::resumeSettings(
      choice_, config_.model, config_.seed, data_->train->size(), config_.epochs);
  // What the examples are made of changes what a step computes; listed only when given,
  // so that checkpoints from before these settings resume.
  if (!config_.data.augment.empty())
    out.push_back({std::string(settingKey(Setting::kAugment)), config_.data.augment});
  if (config_.data.val_fraction)
    out.push_back(
        {std::string(settingKey(Setting::kValFraction)), absl::StrCat(*config_.data.val_fraction)});
  return out;
}

absl::Status TrainingSession::compileAndLoad() {
  backend::Processes& procs = backend::Processes::current();
  const size_t device_count = choice_.compile.pipeline.devices.size();
  listener_.onActivity(absl::StrCat("compiling ", choice_.spec.name, " for ", device_count,
                                    device_count == 1 ? " device" : " devices"));
  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> module,
                   compileModel(choice_.spec, choice_.compile, nullptr, names_));
  RETURN_IF_ERROR(listener_.onCompiled(module));
  // ... and the same module and data: a difference would corrupt the first collective.
  if (procs.several())
    RETURN_IF_ERROR(procs.agree(contentsEveryRankShares(*module, *data_->train, *data_->test),
                                "comparing the compiled module and the data"));
  listener_.onActivity(absl::StrCat("loading ", choice_.spec.name, " onto its devices"));
  runtime::ExecutorOptions executor_options = config_.executor;
  executor_options.seed = config_.seed;
  ASSIGN_OR_RETURN(model_, LoadedModel::create(
                               std::move(module), *data_->train, *data_->test,
                               {.executor = std::move(executor_options),
                                .seed = config_.seed,
                                .schedule = scheduled() ? std::optional(schedule_) : std::nullopt,
                                .model = choice_.spec.name,
                                .settings = resumeSettings(),
                                .metrics = choice_.spec.metrics}));
  listener_.onActivity("initializing the variables");
  RETURN_IF_ERROR(model_->initialize());
  if (!resumed_) RETURN_IF_ERROR(listener_.onInitialized(executor()));
  if (resumed_)
    if (absl::Status s = model_->restore(*resumed_, resumed_path_); !s.ok())
      return settingError(names_, Setting::kResume, s.message());
  if (procs.several()) {  // each rank reads its devices' rows of every batch
    ASSIGN_OR_RETURN(auto rows, model_->trainer().rowsOfThisProcess(ir::kTrainGraph));
    model_->trainLoader().setRows(rows.first, rows.second);
    ASSIGN_OR_RETURN(rows, model_->trainer().rowsOfThisProcess(ir::kEvalGraph));
    model_->testLoader().setRows(rows.first, rows.second);
  }
  return absl::OkStatus();
}

absl::Status TrainingSession::start() {
  return listener_.onStart({.choice = choice_,
                            .module = executor().module(),
                            .train_count = data_->train->size(),
                            .test_count = data_->test->size(),
                            .steps_per_epoch = stepsPerEpoch(),
                            .schedule = scheduled() ? &schedule_ : nullptr,
                            .resumed = resumed_ ? &*resumed_ : nullptr,
                            .resumed_path = resumed_path_});
}

// A resumed run's finished epochs and re-plans, as the run it continues reported them;
// --split auto goes on from the balancer's state, so that it re-plans where that run would.
absl::Status TrainingSession::replayResumed() {
  if (resumed_) {
    replans_ = resumed_->replans;
    next_epoch_ = resumed_->epoch;
    progress_ = resumed_->progress;
    for (const runtime::EpochFigures& e : resumed_->history) {
      for (const runtime::SplitReplan& r : replans_)
        if (r.epoch == e.epoch) RETURN_IF_ERROR(listener_.onReplan(r, "in the run resumed"));
      RETURN_IF_ERROR(listener_.onEpoch(e, /*replayed=*/true).status());
      history_.push_back(e);
    }
    for (const runtime::SplitReplan& r : replans_)
      if (r.epoch == resumed_->epoch) RETURN_IF_ERROR(listener_.onReplan(r, "in the run resumed"));
  }
  if (choice_.auto_split) {
    auto_split_.emplace(choice_.spec, choice_.compile, model_->trainer(), config_.balancer);
    if (resumed_ && resumed_->balancer) auto_split_->restore(*resumed_->balancer);
  }
  return absl::OkStatus();
}

absl::StatusOr<RunEnd> TrainingSession::fit() {
  RunEnd end;
  for (int epoch = next_epoch_; epoch <= config_.epochs; ++epoch) {
    ASSIGN_OR_RETURN(runtime::PassResult trained, trainEpoch(epoch, end));
    if (end.why != RunEnd::Why::kFinished) return end;
    ASSIGN_OR_RETURN(bool go_on, finishEpoch(epoch, trained, end));
    if (!go_on) return end;
  }
  end.epoch = config_.epochs;
  return end;
}

absl::StatusOr<runtime::PassResult> TrainingSession::trainEpoch(int epoch, RunEnd& end) {
  listener_.onActivity(absl::StrCat("training ", choice_.spec.name, ", epoch ", epoch));
  // A copy: the steps update progress_ while the epoch counts on from this.
  const runtime::EpochProgress from = progress_;
  absl::StatusOr<runtime::PassResult> r = model_->trainEpoch(
      epoch, from, [&](const runtime::StepReport& s) { return onStep(epoch, s, end); });
  RETURN_IF_ERROR(r.status());
  RETURN_IF_ERROR(step_status_);
  RETURN_IF_ERROR(stop_status_);
  input_wait_seconds_ += r->input_wait_seconds;
  train_seconds_ += r->seconds - from.seconds;
  end.epoch = epoch;
  end.steps_done = r->steps;
  end.examples_done = r->examples;
  if (end.why == RunEnd::Why::kNonFinite) {
    end.cause = nonFiniteCause();
  } else if (end.why != RunEnd::Why::kFinished && checkpoints_) {
    // Stopped inside the epoch: the checkpoint takes the run as it stands.
    RETURN_IF_ERROR(saveCheckpoint(epoch, progress_));
    end.checkpointed = true;
  }
  return r;
}

bool TrainingSession::onStep(int epoch, const runtime::StepReport& s, RunEnd& end) {
  if (!std::isfinite(s.loss) && !config_.allow_nonfinite) {
    end.why = RunEnd::Why::kNonFinite;
    end.bad_step = s;
    return false;
  }
  if (auto_split_) {
    absl::StatusOr<std::optional<std::vector<int64_t>>> changed = auto_split_->afterStep();
    if (!changed.ok()) {
      step_status_ = changed.status();
      return false;
    }
    if (changed->has_value()) {
      std::vector<std::string> busy;
      for (double ns : auto_split_->balancer().lastBusyNs())
        busy.push_back(absl::StrFormat("%.1f", ns * 1e-6));
      replans_.push_back({.epoch = epoch, .step = s.step, .rows = **changed});
      step_status_ = listener_.onReplan(
          replans_.back(), absl::StrCat("busy ", absl::StrJoin(busy, "/"), " ms per step before"));
      if (!step_status_.ok()) return false;
    }
  }
  progress_ = {.steps = s.step,
               .examples = s.examples,
               .correct = s.correct,
               .loss_sum = s.loss_sum,
               .seconds = s.seconds};
  // The epoch's last step is followed by the epoch's own checkpoint.
  if (config_.checkpoint_every && s.step % *config_.checkpoint_every == 0 && s.step < s.steps) {
    step_status_ = saveCheckpoint(epoch, progress_);
    if (!step_status_.ok()) return false;
  }
  if (!listener_.onStep({.epoch = epoch, .report = s, .executor = executor()})) {
    end.why = RunEnd::Why::kStoppedByCaller;
    return false;
  }
  if (stopAgreed()) {
    end.why = RunEnd::Why::kStopSignal;
    end.signal = stop_signal_;
    return false;
  }
  return true;
}

absl::StatusOr<bool> TrainingSession::finishEpoch(int epoch, const runtime::PassResult& trained,
                                                  RunEnd& end) {
  listener_.onActivity(absl::StrCat("evaluating ", choice_.spec.name, " after epoch ", epoch));
  ASSIGN_OR_RETURN(runtime::PassResult tested, model_->evaluate([&] { return !stopAgreed(); }));
  RETURN_IF_ERROR(stop_status_);
  if (tested.stopped) {  // trained, not evaluated: the resumed run evaluates it
    if (checkpoints_) RETURN_IF_ERROR(saveCheckpoint(epoch, progress_));
    end = {.why = RunEnd::Why::kStopSignal,
           .signal = stop_signal_,
           .epoch = epoch,
           .steps_done = trained.steps,
           .examples_done = trained.examples,
           .while_evaluating = true,
           .checkpointed = checkpoints_.has_value()};
    return false;
  }
  history_.push_back(model_->figures(epoch, trained, tested));
  next_epoch_ = epoch + 1;  // the run after this epoch, as its checkpoint says
  progress_ = {};
  ASSIGN_OR_RETURN(const bool go_on, listener_.onEpoch(history_.back(), /*replayed=*/false));
  listener_.onActivity(absl::StrCat("writing the checkpoint after epoch ", epoch));
  RETURN_IF_ERROR(saveCheckpoint(epoch + 1, {}));
  end = {.epoch = epoch, .after_epoch = true, .checkpointed = checkpoints_.has_value()};
  if (!go_on) {
    end.why = RunEnd::Why::kStoppedByCaller;
    return false;
  }
  // A signal that came while the epoch's row was written stops the run here, rather than
  // one step into the next epoch.
  if (epoch < config_.epochs && stopAgreed()) {
    RETURN_IF_ERROR(stop_status_);
    end.why = RunEnd::Why::kStopSignal;
    end.signal = stop_signal_;
    return false;
  }
  end = {};
  return true;
}

bool TrainingSession::stopAgreed() {
  if (stop_signal_ != 0) return true;
  absl::StatusOr<int> agreed = backend::Processes::current().maxOverRanks(
      listener_.stopSignal(), "agreeing whether to stop");
  if (!agreed.ok()) {
    stop_status_ = agreed.status();
    return true;
  }
  stop_signal_ = *agreed;
  return stop_signal_ != 0;
}

runtime::Checkpoint TrainingSession::checkpointAt(int epoch,
                                                  const runtime::EpochProgress& progress) const {
  runtime::Checkpoint c = model_->checkpoint(epoch, progress, history_);
  c.replans = replans_;
  if (auto_split_) c.balancer = auto_split_->balancer().state();
  return c;
}

absl::Status TrainingSession::saveCheckpoint(int epoch, const runtime::EpochProgress& progress) {
  if (!checkpoints_) return absl::OkStatus();
  RETURN_IF_ERROR(checkpoints_->save(executor(), checkpointAt(epoch, progress)));
  if (backend::Processes::current().rank() != 0) return absl::OkStatus();  // rank 0 writes
  return listener_.onCheckpoint(
      {.epoch = epoch, .steps = progress.steps, .dir = checkpoints_->dir()});
}

absl::Status TrainingSession::save(const std::string& dir, bool replace,
                                   runtime::CheckpointWriter::Words words) {
  runtime::CheckpointWriter writer(dir, /*writes=*/true, std::move(words));
  RETURN_IF_ERROR(writer.prepare(/*replacing=*/replace));
  return writer.save(executor(), checkpointAt(next_epoch_, progress_));
}

absl::StatusOr<runtime::PassResult> TrainingSession::evaluate() { return model_->evaluate(); }

absl::StatusOr<runtime::PassResult> TrainingSession::evaluateOn(
    const runtime::data::ExampleSource& data) {
  return model_->evaluateOn(data);
}

std::optional<std::string> TrainingSession::checkpointDir() const {
  if (!checkpoints_) return std::nullopt;
  return checkpoints_->dir();
}

// Why the loss is not finite, as the variables and the settings tell after the stop, and
// what to do: the first variable (in model order) holding a NaN or an infinity and how many
// do; with AdamW and eps 0, its division by sqrt(exp_avg_sq) + eps, which is 0/0 for a
// value whose gradient has been 0 (by the stop every moment is NaN, so the settings say
// it); else divergence, which a lower learning rate helps.
std::string TrainingSession::nonFiniteCause() {
  const std::string keep_going =
      absl::StrCat("pass ", names_(Setting::kAllowNonfinite), " to keep going");
  absl::StatusOr<runtime::NonFiniteVariables> bad = runtime::findNonFiniteVariables(executor());
  std::string where;
  if (bad.ok() && !bad->names.empty())
    where = absl::StrFormat("@%s holds NaN or infinity (%d of its %d values)%s: ", bad->names[0],
                            bad->first_bad_values, bad->first_values,
                            bad->names.size() == 1
                                ? ""
                                : absl::StrFormat(", as do %d more of the %d variables",
                                                  bad->names.size() - 1, bad->checked));
  else if (bad.ok())
    where = "every variable is still finite, so this step's arithmetic overflowed: ";
  const std::string eps = names_(Setting::kEps);
  if (const auto* adamw = std::get_if<ir::AdamwConfig>(&choice_.compile.pipeline.optimizer);
      adamw != nullptr && adamw->eps == 0)
    return absl::StrCat(where, "AdamW divides by sqrt(exp_avg_sq) + eps, which ", eps,
                        " 0 leaves 0 where a gradient has been 0 throughout, and 0/0 is NaN; give ",
                        eps, " > 0 such as PyTorch's 1e-08, or ", keep_going);
  return absl::StrCat(where, "training diverged; lower ", names_(Setting::kLr), ", or ",
                      keep_going);
}

}  // namespace tandem::training
