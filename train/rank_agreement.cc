#include "train/rank_agreement.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/fnv1a.h"
#include "ir/printer.h"
#include "passes/optimizer_options.h"

namespace tandem::training {
namespace {

// zlib's crc32 (a few GB/s) rather than FNV: the training images are 188 MB of floats.
std::string dataDigest(const runtime::data::Dataset& d) {
  uLong crc = crc32(0L, Z_NULL, 0);
  auto add = [&crc](const void* data, size_t bytes) {
    const auto* p = static_cast<const Bytef*>(data);
    for (size_t at = 0; at < bytes; at += 1u << 30)
      crc = crc32(crc, p + at, static_cast<uInt>(std::min<size_t>(bytes - at, 1u << 30)));
  };
  add(d.images.data(), d.images.size() * sizeof(float));
  add(d.labels.data(), d.labels.size() * sizeof(int32_t));
  return absl::StrFormat("%08x (%d images)", crc, d.count);
}

}  // namespace

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
    const ir::Module& m, const runtime::data::Dataset& train, const runtime::data::Dataset& test) {
  return {{"the compiled module's digest", absl::StrFormat("%016x", ir::fnv1a(ir::printModule(m, {.locations = false})))},
          {"the training data's digest", dataDigest(train)},
          {"the test data's digest", dataDigest(test)}};
}

}  // namespace tandem::training
