#include "passes/optimizer_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "ir/f32_value.h"
#include "ir/interfaces.h"

namespace tandem::passes {
namespace {

constexpr absl::string_view kUpdateSuffix = "_update";

/// The single-form optimizer ops (not their grouped or flat-shard forms), in spec order.
std::vector<const ir::OpInfo*> optimizers() {
  std::vector<const ir::OpInfo*> out;
  for (const ir::OpInfo& info : ir::allOps())
    if (info.optimizer != nullptr && !info.optimizer->grouped_of && !info.optimizer->sharded_of)
      out.push_back(&info);
  return out;
}

// The values option `a` takes: the attribute's range, where a learning rate must also be
// > 0 (0 trains nothing, although the update op itself allows it).
ir::AttrRange optionRange(const ir::AttrSpec& a) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  ir::AttrRange r = a.range.value_or(ir::AttrRange{.lo = -kInf, .hi = kInf});
  if (a.name == "lr" && r.lo <= 0) r.lo = 0, r.lo_open = true;
  return r;
}

}  // namespace

absl::StatusOr<ir::Op> optimizerByName(absl::string_view name) {
  for (const ir::OpInfo* info : optimizers())
    if (info->name == name || optimizerShortName(info->op) == name) return info->op;
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is no optimizer (", optimizerNames(), ")"));
}

ir::Op optimizerOp(const ir::OptimizerConfig& config) {
  return std::visit([](const auto& c) { return c.kOp; }, config);
}

namespace {

// The alternative of OptimizerConfig whose op is `op`, each value its preset.
template <size_t I = 0>
std::optional<ir::OptimizerConfig> presetConfig(ir::Op op) {
  if constexpr (I < std::variant_size_v<ir::OptimizerConfig>) {
    using Config = std::variant_alternative_t<I, ir::OptimizerConfig>;
    if (Config::kOp == op) return Config{};
    return presetConfig<I + 1>(op);
  } else {
    return std::nullopt;
  }
}

}  // namespace

absl::StatusOr<ir::OptimizerConfig> optimizerConfig(ir::Op op) {
  if (std::optional<ir::OptimizerConfig> c = presetConfig(op)) return *c;
  return absl::InvalidArgumentError(
      absl::StrCat(ir::opInfo(op).name, " is no optimizer's update op (", optimizerNames(), ")"));
}

std::vector<std::pair<std::string, double>> hyperParameters(const ir::OptimizerConfig& config) {
  std::vector<std::pair<std::string, double>> out;
  std::visit(
      [&](const auto& c) {
        c.forEach([&](const char* attr, double v) { out.emplace_back(attr, v); });
      },
      config);
  return out;
}

double learningRate(const ir::OptimizerConfig& config) {
  return std::visit([](const auto& c) { return c.lr; }, config);
}

bool setHyperParameter(ir::OptimizerConfig& config, absl::string_view attr, double value) {
  bool found = false;
  std::visit(
      [&](auto& c) {
        c.forEach([&](const char* name, double& field) {
          if (name == attr) field = value, found = true;
        });
      },
      config);
  return found;
}

std::string optimizerShortName(ir::Op op) {
  absl::string_view name = ir::opInfo(op).name;
  absl::ConsumeSuffix(&name, kUpdateSuffix);
  return std::string(name);
}

std::string optimizerNames() {
  std::vector<std::string> names;
  for (const ir::OpInfo* info : optimizers()) names.push_back(optimizerShortName(info->op));
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ", ");
}

std::string optionName(absl::string_view attr) { return absl::StrReplaceAll(attr, {{"_", "-"}}); }

std::optional<double> optimizerDefault(ir::Op op, absl::string_view attr) {
  const ir::OpInfo& info = ir::opInfo(op);
  const int i = info.attrIndex(attr);
  return i < 0 ? std::nullopt : info.attrs[static_cast<size_t>(i)].preset;
}

std::string optimizerRangeText(const ir::AttrSpec& a) {
  const ir::AttrRange r = optionRange(a);
  std::string lo = std::isinf(r.lo) ? "" : absl::StrCat(r.lo_open ? "> " : ">= ", r.lo);
  std::string hi = std::isinf(r.hi) ? "" : absl::StrCat(r.hi_open ? "< " : "<= ", r.hi);
  if (lo.empty() && hi.empty()) return "must be finite";
  return absl::StrCat("must be ", lo, !lo.empty() && !hi.empty() ? " and " : "", hi);
}

std::string optimizerRangeHelp(absl::string_view attr) {
  std::vector<std::pair<std::string, std::string>> ranges;  // optimizer, range
  const std::vector<const ir::OpInfo*> all = optimizers();
  for (const ir::OpInfo* info : all)
    if (int i = info->attrIndex(attr); i >= 0)
      ranges.emplace_back(optimizerShortName(info->op),
                          optimizerRangeText(info->attrs[static_cast<size_t>(i)]));
  const bool same = std::all_of(ranges.begin(), ranges.end(),
                                [&](const auto& r) { return r.second == ranges[0].second; });
  if (ranges.empty()) return "";
  if (same)
    return ranges.size() == all.size()
               ? ranges[0].second
               : absl::StrCat(
                     absl::StrJoin(ranges, ", ",
                                   [](std::string* o, const auto& r) { o->append(r.first); }),
                     " only: ", ranges[0].second);
  return absl::StrJoin(ranges, "; ", [](std::string* o, const auto& r) {
    absl::StrAppend(o, r.first, ": ", r.second);
  });
}

std::string optimizerValueProblem(const ir::AttrSpec& a, double v) {
  const ir::AttrRange r = optionRange(a);
  if (!std::isfinite(v) || !r.contains(v)) return optimizerRangeText(a);
  if (a.kind != ir::AttrKind::kFloat) return "";
  std::string problem = ir::f32RoundingProblem(
      v, [&r](double f) { return r.contains(f); }, optimizerRangeText(a),
      "the update's arithmetic");
  // A learning rate that rounds to 0 is worth saying why it matters.
  if (a.name == "lr" && problem.find(';') != std::string::npos)
    problem.insert(problem.find(';'), ", which trains nothing");
  return problem;
}

}  // namespace tandem::passes
