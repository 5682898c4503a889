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
#include "train/settings_text.h"

namespace tandem::training {
namespace {

// A run by steps is lengthened with more --steps, not epochs.
runtime::LrScheduleWords scheduleWords(const SettingNames& names, bool by_steps = false) {
  return {.schedule = names(Setting::kSchedule),
          .warmup = names(Setting::kWarmup),
          .lr = names(Setting::kLr),
          .length = names(by_steps ? Setting::kSteps : Setting::kEpochs)};
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

}  // namespace

std::string Split::text() const {
  switch (kind) {
    case Kind::kEven:
      return "even";
    case Kind::kAuto:
      return "auto";
    case Kind::kWeights:
      break;
  }
  return absl::StrJoin(weights, ",",
                       [](std::string* out, double w) { absl::StrAppend(out, exactNumber(w)); });
}

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

// The module's devices: this process's, and under mpirun every rank's (each process lists
// its own). Training runs on them: a kind this build has no backend for is said before any
// data loads (dump only compiles, for any kind).
absl::StatusOr<std::vector<ir::Device>> resolveDevices(const ModelSettings& f, bool for_training,
                                                       const SettingNames& names) {
  backend::registerBackends();  // the kinds this build knows, and what they can do
  if (f.devices.empty()) return settingError(names, Setting::kDevices, "lists no device");
  std::vector<ir::Device> devices = f.devices;
  if (f.ranks > 1) {
    // Every process gets the same devices setting: its own. The module spans all ranks'.
    for (const ir::Device& d : devices)
      if (d.rank != 0)
        return settingError(names, Setting::kDevices,
                            absl::StrCat(ir::toString(d), " names a rank; with ", f.ranks,
                                         " processes ", names(Setting::kDevices),
                                         " lists each process's own devices "
                                         "(cpu:0,cpu:1), and rank r's are cpu:0@r, cpu:1@r"));
    devices = ir::devicesAcrossRanks(devices, f.ranks);
    if (devices.size() > ir::kMaxDevices)
      return settingError(names, Setting::kDevices,
                          absl::StrCat(f.ranks, " ranks of ", devices.size() / f.ranks,
                                       " devices are more than ", ir::kMaxDevices));
  }
  if (for_training)
    if (absl::Status here = checkDevicesRunHere(devices); !here.ok())
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
  switch (f.split.kind) {
    case Split::Kind::kEven:
      break;
    case Split::Kind::kAuto:
      if (!for_training)
        return settingError(names, Setting::kSplit,
                            "auto measures the devices while training; dump takes even or "
                            "weights such as 3,1");
      choice.auto_split = devices > 1;
      break;
    case Split::Kind::kWeights:
      if (static_cast<int64_t>(f.split.weights.size()) != devices)
        return settingError(names, Setting::kSplit,
                            absl::StrCat(f.split.weights.size(), " weights for ", devices,
                                         devices == 1 ? " device" : " devices"));
      c.pipeline.weights = f.split.weights;
      break;
  }
  return absl::OkStatus();
}

// The schedule's words (its steps are checked against the run's length once the data is
// known: an epoch of one step stands in for the model's warmup in epochs).
absl::Status resolveSchedule(const ModelSettings& f, const SettingNames& names,
                             ModelChoice& choice) {
  choice.schedule = f.schedule.value_or(choice.spec.defaults.schedule);
  choice.warmup_steps = f.warmup ? f.warmup : choice.spec.defaults.warmup_steps;
  choice.warmup_from_model = !f.warmup && choice.spec.defaults.warmup_steps.has_value();
  choice.warmup_epochs = choice.warmup_steps ? 0 : choice.spec.defaults.warmup_epochs;
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
                     names(Setting::kAllreduceGroups), ", whose reduce_scatter spans the processes"));
  p.shard_updates = f.shard_updates;
  p.group_updates = f.group_updates;  // unset: the default pipeline decides by the kinds
  p.bf16 = f.precision == ir::FloatType::kBf16;
  p.bf16_allreduce = f.allreduce_dtype == ir::FloatType::kBf16;
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
  if (f.optimizer) {  // the model's own values are in range (a zoo test checks each)
    RETURN_IF_ERROR(checkOptimizerValues(*f.optimizer, names));
    c.pipeline.optimizer = *f.optimizer;
  }
  RETURN_IF_ERROR(resolveSchedule(f, names, choice));
  c.pipeline.clip_grad_norm = f.clip_grad_norm.value_or(c.pipeline.clip_grad_norm);
  c.build.label_smoothing = f.label_smoothing.value_or(choice.spec.defaults.label_smoothing);
  RETURN_IF_ERROR(resolvePipeline(f, names, c.pipeline));
  return choice;
}

absl::StatusOr<runtime::LrSchedule> learningRateSchedule(const ModelChoice& c,
                                                         int64_t steps_per_epoch, int epochs,
                                                         const SettingNames& names,
                                                         bool by_steps) {
  absl::StatusOr<runtime::LrSchedule> parsed =
      runtime::LrSchedule::parse(c.schedule, c.warmupSteps(steps_per_epoch, epochs),
                                 steps_per_epoch, epochs, scheduleWords(names, by_steps));
  if (!parsed.ok() && (c.warmup_from_model || (!c.warmup_steps && c.warmup_epochs > 0)))
    // The warmup is the model's, not a flag the user gave: say where it comes from, in the
    // words of the run's length (--steps N trains N steps as epochs of --eval-every).
    return absl::InvalidArgumentError(absl::StrCat(
        by_steps ? absl::StrCat(names(Setting::kSteps), " ", steps_per_epoch * epochs)
                 : absl::StrCat(names(Setting::kEpochs), " ", epochs),
        ": ", c.spec.name, "'s warmup of ",
        c.warmup_steps ? absl::StrCat(*c.warmup_steps, " steps")
                       : absl::StrCat(c.warmupText(), " (", c.warmupSteps(steps_per_epoch, epochs),
                                      " steps)"),
        " leaves its ", c.schedule,
        " schedule no steps; train for more ", by_steps ? "steps" : "epochs", " or give ",
        names(Setting::kWarmup)));
  return parsed;
}

std::string exactNumber(double v) {
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return std::string(text, end);
}

namespace {

// The optimizer's settings by key with exact values. SGD's are the three it always had (so
// that a checkpoint from before the optimizer was a setting resumes); another optimizer's
// name comes first, then its own.
std::vector<std::pair<std::string, std::string>> optimizerSettings(
    const ir::OptimizerConfig& optimizer) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!std::holds_alternative<ir::SgdConfig>(optimizer))
    out.emplace_back("optimizer", passes::optimizerShortName(passes::optimizerOp(optimizer)));
  for (const auto& [attr, value] : passes::hyperParameters(optimizer))
    out.emplace_back(attr, exactNumber(value));
  return out;
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
  for (auto& setting : optimizerSettings(o.pipeline.optimizer)) out.push_back(std::move(setting));
  // Listed only when given, so that checkpoints from before these flags resume.
  if (o.pipeline.clip_grad_norm > 0)
    out.push_back({"clip_grad_norm", exactNumber(o.pipeline.clip_grad_norm)});
  if (o.build.label_smoothing > 0)
    out.push_back({"label_smoothing", exactNumber(o.build.label_smoothing)});
  if (o.pipeline.lr_schedule)
    out.insert(out.end(),
               {{"schedule", c.schedule},
                {"warmup", absl::StrCat(c.warmupSteps(train_count / o.build.batch, epochs))}});
  out.insert(out.end(), {{"precision", std::string(ir::toWord(f.precision))},
                         {"allreduce_dtype", std::string(ir::toWord(f.allreduce_dtype))},
                         {"sync_bn", f.sync_bn ? "on" : "off"}});
  // What the model is made for (a GPT's size): a checkpoint rebuilds it from these.
  for (const auto& [key, value] : c.spec.made_for) out.push_back({"model." + key, value});
  return out;
}

}  // namespace tandem::training
