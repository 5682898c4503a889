#include "passes/pipeline.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/number_format.h"
#include "ir/target.h"
#include "passes/autodiff.h"
#include "passes/optimizer_options.h"
#include "passes/registry.h"

namespace tandem::passes {
namespace {

/// Splits at top-level commas (not inside {} or []); an error on unbalanced brackets.
absl::StatusOr<std::vector<std::string>> splitTopLevel(absl::string_view text,
                                                       absl::string_view what) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth < 0)
        return absl::InvalidArgumentError(
            absl::StrCat("unbalanced '", std::string(1, c), "' in ", what, " '", text, "'"));
    }
    if (c == ',' && depth == 0) {
      parts.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0)
    return absl::InvalidArgumentError(absl::StrCat("unclosed bracket in ", what, " '", text, "'"));
  parts.push_back(std::move(current));
  return parts;
}

/// autodiff with the config's optimizer and a value for each of its hyper-parameters, in
/// its update op's order.
std::string autodiffStep(const PipelineConfig& c) {
  const ir::Op op = optimizerOp(c.optimizer);
  std::vector<std::string> options;
  if (op != Autodiff::kDefaultOptimizer)
    options.push_back(absl::StrCat("optimizer=", optimizerShortName(op)));
  for (const auto& [attr, value] : hyperParameters(c.optimizer))
    options.push_back(absl::StrCat(optionName(attr), "=", ir::formatDouble(value)));
  if (c.decay_matrices_only) options.push_back("decay=matrices");
  return absl::StrCat("autodiff{", absl::StrJoin(options, ","), "}");
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Pass>>> parsePipeline(absl::string_view text) {
  std::vector<std::unique_ptr<Pass>> out;
  if (absl::StripAsciiWhitespace(text).empty()) return out;
  auto items = splitTopLevel(text, "pipeline");
  if (!items.ok()) return items.status();
  for (const std::string& raw : *items) {
    absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.empty())
      return absl::InvalidArgumentError(absl::StrCat("empty pass name in pipeline '", text, "'"));
    std::string name(item);
    std::map<std::string, std::string> values;
    if (size_t brace = item.find('{'); brace != absl::string_view::npos) {
      if (item.back() != '}')
        return absl::InvalidArgumentError(
            absl::StrCat("pass options must end with '}' in '", item, "'"));
      name = std::string(absl::StripAsciiWhitespace(item.substr(0, brace)));
      absl::string_view body = item.substr(brace + 1, item.size() - brace - 2);
      if (!absl::StripAsciiWhitespace(body).empty()) {
        auto opts = splitTopLevel(body, absl::StrCat("options of ", name));
        if (!opts.ok()) return opts.status();
        for (const std::string& opt : *opts) {
          size_t eq = opt.find('=');
          if (eq == std::string::npos)
            return absl::InvalidArgumentError(absl::StrCat("pass ", name, ": option '",
                                                           absl::StripAsciiWhitespace(opt),
                                                           "' must be written KEY=VALUE"));
          std::string key(absl::StripAsciiWhitespace(opt.substr(0, eq)));
          if (values.contains(key))
            return absl::InvalidArgumentError(
                absl::StrCat("pass ", name, ": option '", key, "' is given twice"));
          values[key] = std::string(absl::StripAsciiWhitespace(opt.substr(eq + 1)));
        }
      }
    }
    PassOptions opts(name, std::move(values));
    auto pass = createPass(name, opts);
    if (!pass.ok()) return pass.status();
    out.push_back(*std::move(pass));
  }
  return out;
}

namespace {

// plan-memory with the options `c` sets (none at their defaults: the text users see).
std::string planMemoryText(const PipelineConfig& c) {
  std::vector<std::string> set;
  if (c.alignment != 64) set.push_back(absl::StrCat("alignment=", c.alignment));
  if (!c.alias_views) set.push_back("views=copy");
  return set.empty() ? "plan-memory" : absl::StrCat("plan-memory{", absl::StrJoin(set, ","), "}");
}

// Whether every device of `c` has a kernel for each of `ops` (ir/target.h's lacks_kernel).
bool everyTargetHas(const PipelineConfig& c, std::initializer_list<ir::Op> ops) {
  return std::all_of(c.devices.begin(), c.devices.end(), [&](const ir::Device& d) {
    const ir::TargetInfo* t = ir::findTarget(d.kind);
    return t != nullptr && std::none_of(ops.begin(), ops.end(), [&](ir::Op op) {
             return t->lacks_kernel != nullptr && t->lacks_kernel(op);
           });
  });
}

// The default pipeline, or without autodiff (`training` false) a prediction module's.
std::string pipelineText(const PipelineConfig& c, bool training) {
  // Numbers are written exactly (shortest round-trip form): StrCat keeps only 6 digits,
  // which would change an lr of 0.1234567 into 0.123457.
  auto num = [](double v) { return ir::formatDouble(v); };
  std::vector<std::string> passes{
      // Before autodiff: it rewrites the forward, and autodiff derives a bf16 backward.
      c.bf16 ? "mixed-precision{dtype=bf16}" : "",
      training ? autodiffStep(c) : "",
      c.lr_schedule ? "feed-learning-rate" : "",
      // Between autodiff and replicate: it rewrites forward and backward together, once.
      c.fuse ? "fuse-conv-bn-relu" : "",
      c.fuse ? "fuse-relu-pool" : "",
      // After fuse-relu-pool, whose avg_pool2d{relu} it matches; where every device can
      // run the fused pair.
      c.fuse && everyTargetHas(
                    c, {ir::Op::kConv2dReluAvgPool, ir::Op::kConv2dReluAvgPoolBackwardFilter})
          ? "fuse-conv-relu-pool"
          : "",
      absl::StrCat(
          "replicate{devices=[",
          absl::StrJoin(c.devices, ",",
                        [](std::string* o, const ir::Device& d) { o->append(ir::toString(d)); }),
          "]",
          c.weights.empty()
              ? ""
              : absl::StrCat(",weights=[",
                             absl::StrJoin(c.weights, ",",
                                           [&](std::string* o, double w) { o->append(num(w)); }),
                             "]"),
          "}"),
      absl::StrCat("insert-collectives{bucket-mb=", num(c.bucket_mb),
                   ",first-bucket-mb=", num(c.first_bucket_mb),
                   c.allreduce_groups > 1 ? absl::StrCat(",groups=", c.allreduce_groups) : "",
                   c.sync_bn ? ",sync-bn=true" : "",
                   c.bf16_allreduce ? ",allreduce-dtype=bf16" : "", "}"),
      // After insert-collectives: every device clips the all-reduced gradients alike.
      c.clip_grad_norm > 0 ? absl::StrCat("clip-grad-norm{max-norm=", num(c.clip_grad_norm), "}")
                           : "",
      // After insert-collectives: it turns the gradient buckets' all_reduces into shards.
      c.shard_updates ? "shard-weight-update" : "",
      // After insert-collectives: the recompute reads the statistics the forward read,
      // all-reduced ones under sync batch norm.
      c.fuse && c.recompute ? "recompute-bn-relu" : "",
      "dce",
      "schedule",
      // After schedule: each bucket's group takes the place of the bucket's last update.
      // By default where a device runs an optimizer's grouped form as one launch (the
      // target's facts, ir/target.h).
      c.group_updates.value_or(std::any_of(c.devices.begin(), c.devices.end(),
                                           [](const ir::Device& d) {
                                             const ir::TargetInfo* t = ir::findTarget(d.kind);
                                             return t != nullptr && t->multi_tensor_update;
                                           }))
          ? "group-updates"
          : "",
      // The execution plan, on the graph as it will run.
      "assign-streams",
      "plan-events",
      c.layouts ? "assign-layouts" : "",
      c.exact_convolutions ? "choose-algorithms{conv=direct}" : "choose-algorithms",
      planMemoryText(c),
  };
  passes.erase(std::remove(passes.begin(), passes.end(), ""), passes.end());
  return absl::StrJoin(passes, ",");
}

}  // namespace

std::string defaultPipeline(const PipelineConfig& c) { return pipelineText(c, /*training=*/true); }

std::string predictPipeline(const PipelineConfig& c) {
  PipelineConfig forward = c;
  // No training step: nothing to differentiate, update, reduce or recompute; the same
  // passes over the forward as the training pipeline's, with its settings.
  forward.sync_bn = false;
  forward.group_updates = false;
  forward.clip_grad_norm = 0;
  forward.shard_updates = false;
  forward.recompute = false;
  forward.lr_schedule = false;
  return pipelineText(forward, /*training=*/false);
}

std::vector<std::string> defaultPassNames() {
  return {"mixed-precision",    "autodiff",
          "feed-learning-rate", "fuse-conv-bn-relu",
          "fuse-relu-pool",     "fuse-conv-relu-pool",
          "replicate",          "insert-collectives",
          "clip-grad-norm",     "shard-weight-update",
          "recompute-bn-relu",  "dce",
          "schedule",           "group-updates",
          "assign-streams",     "plan-events",
          "assign-layouts",     "choose-algorithms",
          "plan-memory"};
}

}  // namespace tandem::passes
