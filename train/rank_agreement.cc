#include "train/rank_agreement.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/fnv1a.h"
#include "ir/printer.h"
#include "passes/optimizer_options.h"
#include "train/training_data.h"

namespace tandem::training {
std::vector<std::pair<std::string, std::string>> settingsEveryRankShares(
    const TrainConfig& config, const ModelChoice& c, const SettingNames& names) {
  const CompileOptions& o = c.compile;
  const passes::PipelineConfig& p = o.pipeline;
  const ModelSettings& m = config.model;
  const std::vector<ir::Device> local(
      p.devices.begin(),
      p.devices.begin() + static_cast<std::ptrdiff_t>(p.devices.size() / std::max(m.ranks, 1)));
  const std::vector<std::pair<std::string, double>> values = passes::hyperParameters(p.optimizer);
  auto hyper = [&](absl::string_view attr) {  // "-" for another optimizer's
    for (const auto& [name, value] : values)
      if (name == attr) return exactNumber(value);
    return std::string("-");
  };
  auto given = [](bool on) { return std::string(on ? "given" : "not given"); };
  auto number = [](const auto& v) { return v ? absl::StrCat(*v) : std::string("unset"); };
  using S = Setting;
  std::vector<std::pair<Setting, std::string>> shared = {
      {S::kModel, c.spec.name},
      {S::kDevices, ir::toString(local)},
      {S::kBatch, absl::StrCat(o.build.batch)},
      {S::kSplit, m.split.text()},
      {S::kOptimizer, passes::optimizerShortName(passes::optimizerOp(p.optimizer))},
      {S::kLr, hyper("lr")},
      {S::kMomentum, hyper("momentum")},
      {S::kWeightDecay, hyper("weight_decay")},
      {S::kBeta1, hyper("beta1")},
      {S::kBeta2, hyper("beta2")},
      {S::kEps, hyper("eps")},
      {S::kSchedule, c.schedule},
      {S::kWarmup, c.warmupText()},
      {S::kClipGradNorm, exactNumber(p.clip_grad_norm)},
      {S::kLabelSmoothing, exactNumber(o.build.label_smoothing)},
      {S::kInit, ir::toString(o.build.weight_init)},
      {S::kBucketMb, exactNumber(p.bucket_mb)},
      {S::kFirstBucketMb, exactNumber(p.first_bucket_mb)},
      {S::kAllreduceGroups, absl::StrCat(p.allreduce_groups)},
      {S::kSyncBn, m.sync_bn ? "on" : "off"},
      {S::kShardUpdates, given(m.shard_updates)},
      {S::kNoFuse, given(m.no_fuse)},
      {S::kPlainLayout, given(m.plain_layout)},
      {S::kNoRecompute, given(m.no_recompute)},
      {S::kGroupUpdates, !m.group_updates   ? "auto"
                         : *m.group_updates ? "on"
                                            : "off"},
      {S::kPrecision, std::string(ir::toWord(m.precision))},
      {S::kAllreduceDtype, std::string(ir::toWord(m.allreduce_dtype))},
      {S::kEpochs, absl::StrCat(config.epochs)},
      {S::kSeed, absl::StrCat(config.seed)},
      {S::kLimitTrain, number(config.limit_train)},
      {S::kLimitTest, number(config.limit_test)},
      {S::kValFraction,
       config.data.val_fraction ? absl::StrCat(*config.data.val_fraction) : "not given"},
      {S::kAugment, config.data.augment},
      {S::kImageSize, absl::StrCat(config.data.image_height, "x", config.data.image_width)},
      {S::kAllowNonfinite, given(config.allow_nonfinite)},
      // Resume first: a front end may take the checkpoint directory from it.
      {S::kResume, given(config.resume.has_value())},
      {S::kCheckpoint, given(config.checkpoint.has_value())},
      {S::kCheckpointEvery, number(config.checkpoint_every)}};
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [setting, value] : shared) out.emplace_back(names(setting), std::move(value));
  out.insert(out.end(), config.also_shared.begin(), config.also_shared.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> contentsEveryRankShares(
    const ir::Module& m, const runtime::data::ExampleSource& train,
    const runtime::data::ExampleSource& test) {
  return {{"the compiled module's digest",
           absl::StrFormat("%016x", ir::fnv1a(ir::printModule(m, {.locations = false})))},
          {"the training data's digest", sourceDigest(train)},
          {"the test data's digest", sourceDigest(test)}};
}

}  // namespace tandem::training
