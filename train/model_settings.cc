#include "train/model_settings.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/backend.h"
#include "backend/backends.h"
#include "ir/f32_value.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "passes/optimizer_options.h"
#include "runtime/lr_schedule.h"

namespace tandem::training {
namespace {

runtime::LrScheduleWords scheduleWords(const SettingNames& names) {
  return {.schedule = names(Setting::kSchedule),
          .warmup = names(Setting::kWarmup),
          .lr = names(Setting::kLr),
          .epochs = names(Setting::kEpochs)};
}

// "kaiming", "normal:0.01" or the IR's own spelling "normal(std=0.01)".
absl::StatusOr<ir::Initializer> parseInit(const std::string& text, const SettingNames& names) {
  using K = ir::Initializer::Kind;
  if (text == "kaiming") return ir::Initializer{K::kKaiming};
  std::string std_text;
  if (text.rfind("normal:", 0) == 0) std_text = text.substr(7);
  if (text.rfind("normal(std=", 0) == 0 && text.back() == ')')
    std_text = text.substr(11, text.size() - 12);
  double std = 0;
  auto in_range = [](double v) { return v > 0 && v <= 100; };
  if (std_text.empty() || !absl::SimpleAtod(std_text, &std) || !in_range(std))
    return settingError(names, Setting::kInit,
                        absl::StrCat("'", text,
                                     "' is not an initializer (kaiming, or normal:STD with "
                                     "0 < STD <= 100, such as normal:0.01)"));
  // The weights are drawn in f32: a STD that rounds to 0 there initializes nothing.
  const std::string problem = ir::f32RoundingProblem(std, in_range, "must be > 0 and <= 100",
                                                     "the initializer's arithmetic");
  if (!problem.empty())
    return settingError(names, Setting::kInit,
                        absl::StrCat("'", text, "': STD ", std_text, " ", problem));
  return ir::Initializer{K::kNormal, std};
}

absl::StatusOr<std::vector<double>> parseWeights(const std::string& text, size_t devices,
                                                 bool for_training, const SettingNames& names) {
  std::vector<double> weights;
  for (absl::string_view w : absl::StrSplit(text, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(w, &v) || !(v > 0) || !std::isfinite(v))
      return settingError(names, Setting::kSplit,
                          absl::StrCat("'", text, "' is not even", for_training ? ", auto, " : " ",
                                       "or positive weights such as 3,1"));
    weights.push_back(v);
  }
  if (weights.size() != devices)
    return settingError(names, Setting::kSplit,
                        absl::StrCat(weights.size(), " weights for ", devices,
                                     devices == 1 ? " device" : " devices"));
  return weights;
}

// --optimizer and its hyper-parameters: each given one must be an attribute of the chosen
// optimizer's update op, within the range ir/ops.td declares for it. Unset ones keep the
// model's defaults (SGD for the lessons' CNNs, AdamW for vit and mlp) or, for an optimizer
// other than the model's, take PyTorch's.
absl::Status resolveOptimizer(const ModelSettings& f, const TrainingDefaults& model,
                              passes::PipelineConfig& p, const SettingNames& names) {
  absl::StatusOr<ir::Op> op = passes::optimizerByName(f.optimizer.value_or(model.optimizer));
  if (!op.ok()) return settingError(names, Setting::kOptimizer, op.status().message());
  const ir::OpInfo& info = ir::opInfo(*op);
  p.optimizer = passes::optimizerShortName(*op);
  // The setting named as the front end names it; an attribute no setting sets, by its key.
  auto nameOf = [&](const std::string& attr) {
    Setting s;
    return settingOfKey(attr, &s) ? names(s) : attr;
  };
  for (const auto& [attr, given] : f.hyper) {
    const std::string setting = nameOf(attr);
    auto error = [&](absl::string_view message) {
      return absl::InvalidArgumentError(absl::StrCat(setting, ": ", message));
    };
    const int i = info.attrIndex(attr);
    if (i < 0) {
      std::vector<std::string> takes;
      for (const ir::AttrSpec& a : info.attrs) takes.push_back(nameOf(a.name));
      return error(absl::StrCat("not a setting of ", names(Setting::kOptimizer), " ", p.optimizer,
                                " (it takes ", absl::StrJoin(takes, ", "), ")"));
    }
    const std::string problem =
        passes::optimizerValueProblem(info.attrs[static_cast<size_t>(i)], given.value);
    if (absl::StartsWith(problem, "must "))
      return error(absl::StrCat(given.text, " is out of range: ", problem));
    if (!problem.empty()) return error(absl::StrCat(given.text, " ", problem));
  }
  const std::pair<absl::string_view, double*> fields[] = {
      {"lr", &p.lr},       {"momentum", &p.momentum}, {"weight_decay", &p.weight_decay},
      {"beta1", &p.beta1}, {"beta2", &p.beta2},       {"eps", &p.eps}};
  for (const auto& [attr, field] : fields) {
    // The model's defaults are for its own optimizer; another one starts from PyTorch's.
    if (p.optimizer != model.optimizer)
      if (std::optional<double> d = passes::optimizerDefault(*op, attr)) *field = *d;
    if (auto given = f.hyper.find(std::string(attr)); given != f.hyper.end())
      *field = given->second.value;
  }
  return absl::OkStatus();
}

}  // namespace

int64_t ModelChoice::warmupSteps(int64_t steps_per_epoch, int epochs) const {
  if (warmup_steps) return *warmup_steps;
  if (warmup_epochs < epochs) return warmup_epochs * steps_per_epoch;
  return steps_per_epoch * epochs / 10;
}

std::string ModelChoice::warmupText() const {
  if (warmup_steps) return absl::StrCat(*warmup_steps);
  return absl::StrCat(warmup_epochs, warmup_epochs == 1 ? " epoch" : " epochs");
}

namespace {

// --devices parsed; under mpirun, every rank's (each process lists its own). Training
// runs on them: a kind this build has no backend for is said before any data loads (dump
// only compiles, for any kind).
absl::StatusOr<std::vector<ir::Device>> resolveDevices(const ModelSettings& f, bool for_training,
                                                       const SettingNames& names) {
  backend::registerBackends();  // the kinds this build knows, and what they can do
  auto devices = ir::parseTargetDevices(f.devices);
  if (!devices.ok()) return settingError(names, Setting::kDevices, devices.status().message());
  if (f.ranks > 1) {
    // Every process gets the same devices setting: its own. The module spans all ranks'.
    for (const ir::Device& d : *devices)
      if (d.rank != 0)
        return settingError(names, Setting::kDevices,
                            absl::StrCat(ir::toString(d), " names a rank; with ", f.ranks,
                                         " processes ", names(Setting::kDevices),
                                         " lists each process's own devices "
                                         "(cpu:0,cpu:1), and rank r's are cpu:0@r, cpu:1@r"));
    *devices = ir::devicesAcrossRanks(*devices, f.ranks);
    if (devices->size() > ir::kMaxDevices)
      return settingError(names, Setting::kDevices,
                          absl::StrCat(f.ranks, " ranks of ", devices->size() / f.ranks,
                                       " devices are more than ", ir::kMaxDevices));
  }
  if (for_training)
    if (absl::Status here = checkDevicesRunHere(*devices); !here.ok())
      return settingError(names, Setting::kDevices, here.message());
  return devices;
}

// The global batch (every device needs an example) and how it is split across the devices.
absl::Status resolveBatchAndSplit(const ModelSettings& f, bool for_training,
                                  const SettingNames& names, ModelChoice& choice) {
  CompileOptions& c = choice.compile;
  constexpr int64_t kDefaultBatch = 256;
  const int64_t devices = static_cast<int64_t>(c.pipeline.devices.size());
  const int64_t batch = f.batch        ? *f.batch
                        : for_training ? kDefaultBatch
                                       : std::max(kDefaultBatch, devices);
  if (batch < devices)
    return settingError(names, Setting::kBatch,
                        absl::StrCat(batch, " is smaller than the device count ", devices,
                                     "; every device needs at least one example"));
  c.build.batch = batch;
  if (f.split == "auto") {
    if (!for_training)
      return settingError(names, Setting::kSplit,
                          "auto measures the devices while training; dump takes even or "
                          "weights such as 3,1");
    choice.auto_split = devices > 1;
  } else if (f.split != "even") {
    ASSIGN_OR_RETURN(c.pipeline.weights,
                     parseWeights(f.split, static_cast<size_t>(devices), for_training, names));
  }
  return absl::OkStatus();
}

// The schedule's words (its steps are checked against the run's length once the data is
// known: an epoch of one step stands in for the model's warmup in epochs).
absl::Status resolveSchedule(const ModelSettings& f, const SettingNames& names,
                             ModelChoice& choice) {
  choice.schedule = f.schedule.value_or(choice.spec.defaults.schedule);
  choice.warmup_steps = f.warmup;
  choice.warmup_epochs = f.warmup ? 0 : choice.spec.defaults.warmup_epochs;
  const int64_t warmup = choice.warmup_steps.value_or(choice.warmup_epochs);
  ASSIGN_OR_RETURN(
      runtime::LrSchedule schedule,
      runtime::LrSchedule::parse(choice.schedule, warmup, warmup + 2, 1, scheduleWords(names)));
  choice.compile.pipeline.lr_schedule = !schedule.isConstant();
  return absl::OkStatus();
}

// The pipeline's switches: all-reduce groups, fusion, sync-bn, sharded updates, grouped
// updates, the arithmetic's dtypes; each checked against the devices and the others.
absl::Status resolvePipeline(const ModelSettings& f, const SettingNames& names,
                             passes::PipelineConfig& p) {
  const int64_t devices = static_cast<int64_t>(p.devices.size());
  p.bucket_mb = f.bucket_mb;
  p.first_bucket_mb = f.first_bucket_mb;
  if (f.allreduce_groups > 1 &&
      (devices % f.allreduce_groups != 0 || f.allreduce_groups >= devices))
    return settingError(names, Setting::kAllreduceGroups,
                        absl::StrCat(f.allreduce_groups, " does not cut the ", devices,
                                     " devices into equal groups of two or more"));
  p.allreduce_groups = f.allreduce_groups;
  p.fuse = !f.no_fuse;
  p.recompute = !f.no_recompute;
  p.layouts = !f.plain_layout;
  if (f.sync_bn && f.no_fuse)
    return settingError(names, Setting::kSyncBn,
                        absl::StrCat("all-reduces the statistics that the fused batch norm "
                                     "computes in its own step; it cannot go with ",
                                     names(Setting::kNoFuse)));
  p.sync_bn = f.sync_bn;
  if (f.shard_updates && devices < 2)
    return settingError(names, Setting::kShardUpdates,
                        absl::StrCat("shards the weight update across the devices; with one "
                                     "device there is nothing to shard (give ",
                                     names(Setting::kDevices), " two or more)"));
  if (f.shard_updates && f.clip_grad_norm)
    return settingError(names, Setting::kShardUpdates,
                        absl::StrCat("does not go with ", names(Setting::kClipGradNorm),
                                     " yet (the norm needs each shard's sum of squares "
                                     "all-reduced)"));
  // shard-weight-update refuses it too, naming a bucket: with groups, rank r of every
  // group steps shard r, and the groups' shards r would meet across processes on device r.
  if (f.shard_updates && f.allreduce_groups > 1 && f.ranks > 1)
    return settingError(
        names, Setting::kShardUpdates,
        absl::StrCat("does not go with ", names(Setting::kAllreduceGroups), " across ", f.ranks,
                     " processes (each group's shards would be all-reduced across processes "
                     "from every device, and a process runs its collectives across processes "
                     "on its first device only); shard without ",
                     names(Setting::kAllreduceGroups),
                     ", whose reduce_scatter spans the "
                     "processes"));
  p.shard_updates = f.shard_updates;
  // auto leaves it unset: the default pipeline decides by the device kinds.
  if (f.group_updates == "on" || f.group_updates == "off")
    p.group_updates = f.group_updates == "on";
  else if (f.group_updates != "auto")
    return settingError(names, Setting::kGroupUpdates,
                        absl::StrCat("'", f.group_updates, "' is not auto, on or off"));
  for (auto [setting, value] : {std::pair{Setting::kPrecision, &f.precision},
                                std::pair{Setting::kAllreduceDtype, &f.allreduce_dtype}})
    if (*value != "f32" && *value != "bf16")
      return settingError(
          names, setting,
          absl::StrCat("'", *value, "' is not a dtype Tandem trains in: f32 or bf16"));
  p.bf16 = f.precision == "bf16";
  p.bf16_allreduce = f.allreduce_dtype == "bf16";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelChoice> resolveModel(const ModelSpec& spec, const ModelSettings& f,
                                         bool for_training, const SettingNames& names) {
  ModelChoice choice{.spec = spec, .compile = withModelDefaults(spec)};
  CompileOptions& c = choice.compile;
  ASSIGN_OR_RETURN(c.pipeline.devices, resolveDevices(f, for_training, names));
  RETURN_IF_ERROR(resolveBatchAndSplit(f, for_training, names, choice));
  if (f.init) {
    ASSIGN_OR_RETURN(c.build.weight_init, parseInit(*f.init, names));
  }
  RETURN_IF_ERROR(resolveOptimizer(f, choice.spec.defaults, c.pipeline, names));
  RETURN_IF_ERROR(resolveSchedule(f, names, choice));
  c.pipeline.clip_grad_norm = f.clip_grad_norm.value_or(0);
  c.build.label_smoothing = f.label_smoothing.value_or(choice.spec.defaults.label_smoothing);
  RETURN_IF_ERROR(resolvePipeline(f, names, c.pipeline));
  return choice;
}

absl::StatusOr<runtime::LrSchedule> learningRateSchedule(const ModelChoice& c,
                                                         int64_t steps_per_epoch, int epochs,
                                                         const SettingNames& names) {
  absl::StatusOr<runtime::LrSchedule> parsed =
      runtime::LrSchedule::parse(c.schedule, c.warmupSteps(steps_per_epoch, epochs),
                                 steps_per_epoch, epochs, scheduleWords(names));
  if (!parsed.ok() && !c.warmup_steps && c.warmup_epochs > 0)
    // The warmup is the model's, not a flag the user gave: say where it comes from.
    return absl::InvalidArgumentError(absl::StrCat(
        names(Setting::kEpochs), " ", epochs, ": ", c.spec.name, "'s warmup of ", c.warmupText(),
        " (", c.warmupSteps(steps_per_epoch, epochs), " steps) leaves its ", c.schedule,
        " schedule no steps; train for more epochs or give ", names(Setting::kWarmup)));
  return parsed;
}

std::string exactNumber(double v) {
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return std::string(text, end);
}

namespace {

// The optimizer's settings as flags and exact values. SGD's are the three it always had
// (so that a checkpoint from before --optimizer resumes); another optimizer's name comes
// first, then its own.
std::vector<std::pair<std::string, std::string>> optimizerSettings(
    const passes::PipelineConfig& p) {
  if (p.optimizer == "sgd")
    return {{"lr", exactNumber(p.lr)},
            {"momentum", exactNumber(p.momentum)},
            {"weight_decay", exactNumber(p.weight_decay)}};
  return {{"optimizer", p.optimizer},      {"lr", exactNumber(p.lr)},
          {"beta1", exactNumber(p.beta1)}, {"beta2", exactNumber(p.beta2)},
          {"eps", exactNumber(p.eps)},     {"weight_decay", exactNumber(p.weight_decay)}};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> resumeSettings(const ModelChoice& c,
                                                                const ModelSettings& f,
                                                                uint64_t seed, int64_t train_count,
                                                                int epochs) {
  const CompileOptions& o = c.compile;
  std::vector<std::pair<std::string, std::string>> out{{"batch", absl::StrCat(o.build.batch)},
                                                       {"seed", absl::StrCat(seed)},
                                                       {"limit_train", absl::StrCat(train_count)}};
  for (auto& setting : optimizerSettings(o.pipeline)) out.push_back(std::move(setting));
  // Listed only when given, so that checkpoints from before these flags resume.
  if (o.pipeline.clip_grad_norm > 0)
    out.push_back({"clip_grad_norm", exactNumber(o.pipeline.clip_grad_norm)});
  if (o.build.label_smoothing > 0)
    out.push_back({"label_smoothing", exactNumber(o.build.label_smoothing)});
  if (o.pipeline.lr_schedule)
    out.insert(out.end(),
               {{"schedule", c.schedule},
                {"warmup", absl::StrCat(c.warmupSteps(train_count / o.build.batch, epochs))}});
  out.insert(out.end(), {{"precision", f.precision},
                         {"allreduce_dtype", f.allreduce_dtype},
                         {"sync_bn", f.sync_bn ? "on" : "off"}});
  return out;
}

}  // namespace tandem::training
